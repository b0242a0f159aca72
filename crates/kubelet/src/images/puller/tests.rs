//! The pull policy table, and the ErrImagePull → ImagePullBackOff sequence,
//! on the fake runtime with a recorder writing into memory.

use std::sync::Mutex;

use k8s_openapi::api::core::v1::{Container, ObjectReference};

use super::*;
use crate::backoff::BackoffConfig;
use crate::runtime::fake::FakeRuntime;
use crate::testutil::recorder;

fn container(image: &str, policy: Option<&str>) -> Container {
    Container {
        name: "app".into(),
        image: Some(image.into()),
        image_pull_policy: policy.map(Into::into),
        ..Default::default()
    }
}

#[test]
fn pull_policy_defaults_as_upstream() {
    let cases = [
        ("busybox", None, "Always"),
        ("busybox:latest", None, "Always"),
        ("busybox:1.36", None, "IfNotPresent"),
        ("registry:5000/busybox", None, "Always"),
        ("registry:5000/busybox:1.36", None, "IfNotPresent"),
        ("busybox@sha256:abc", None, "IfNotPresent"),
        ("busybox:1.36", Some("Never"), "Never"),
    ];
    for (image, set, want) in cases {
        assert_eq!(pull_policy(&container(image, set)), want, "{image} {set:?}");
    }
}

#[tokio::test]
async fn each_policy_gives_upstreams_reference_or_waiting_reason_and_events() {
    // (policy, image present, result: Ok(ref) or Err(reason), event reasons)
    type Case = (
        &'static str,
        bool,
        Result<&'static str, &'static str>,
        &'static [&'static str],
    );
    let cases: [Case; 6] = [
        ("Never", true, Ok("sha256:img"), &[]),
        (
            "Never",
            false,
            Err("ErrImageNeverPull"),
            &["ErrImageNeverPull"],
        ),
        ("IfNotPresent", true, Ok("sha256:img"), &["Pulled"]),
        (
            "IfNotPresent",
            false,
            Err("ErrImagePull"),
            &["Pulling", "Failed", "Failed"],
        ),
        ("Always", true, Ok("sha256:img"), &["Pulling", "Pulled"]),
        (
            "Always",
            false,
            Err("ErrImagePull"),
            &["Pulling", "Failed", "Failed"],
        ),
    ];
    for (policy, present, want, events) in cases {
        let rt = FakeRuntime::new();
        if present {
            rt.add_image("img");
        }
        let (rec, recorded) = recorder();
        let backoff = Mutex::new(Backoff::new(BackoffConfig::default()));
        let puller = Puller {
            runtime: &rt,
            recorder: &rec,
            backoff: &backoff,
        };
        let got = puller
            .ensure_image(
                "uid",
                &ObjectReference::default(),
                &container("img", Some(policy)),
                None,
            )
            .await;
        rec.flush().await;
        let case = format!("{policy} present={present}");
        match want {
            Ok(r) => assert_eq!(got.as_deref().ok(), Some(r), "{case}"),
            Err(reason) => assert_eq!(got.err().map(|w| w.0).as_deref(), Some(reason), "{case}"),
        }
        let reasons: Vec<String> = recorded.reasons().into_iter().map(|r| r.0).collect();
        assert_eq!(reasons, events, "{case}");
    }
}

#[tokio::test]
async fn a_failed_pull_backs_off_and_keeps_its_error_in_the_waiting_message() {
    let rt = FakeRuntime::new();
    let (rec, recorded) = recorder();
    let backoff = Mutex::new(Backoff::new(BackoffConfig::default()));
    let puller = Puller {
        runtime: &rt,
        recorder: &rec,
        backoff: &backoff,
    };
    let c = container("missing:1", None);
    let cref = ObjectReference::default();
    let first = puller
        .ensure_image("uid", &cref, &c, None)
        .await
        .unwrap_err();
    assert_eq!(first.0, "ErrImagePull");
    assert!(first.1.contains("not found"), "{}", first.1);
    // Within the back-off: no pull, ImagePullBackOff with the pull error.
    let second = puller
        .ensure_image("uid", &cref, &c, Some(&first))
        .await
        .unwrap_err();
    assert_eq!(second.0, "ImagePullBackOff");
    assert_eq!(
        second.1,
        format!("Back-off pulling image \"missing:1\": {}", first.1)
    );
    // Another pod's pulls of the same image are not held back.
    let other = puller
        .ensure_image("uid-2", &cref, &c, None)
        .await
        .unwrap_err();
    assert_eq!(other.0, "ErrImagePull");
    rec.flush().await;
    let pulls = rt
        .calls()
        .iter()
        .filter(|c| c.starts_with("pull_image"))
        .count();
    assert_eq!(pulls, 2, "{:?}", rt.calls());
    let backoffs: Vec<String> = recorded
        .reasons()
        .into_iter()
        .filter(|(r, _)| r == "BackOff")
        .map(|(_, m)| m)
        .collect();
    assert_eq!(backoffs, ["Back-off pulling image \"missing:1\""]);
}
