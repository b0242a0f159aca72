//! Warnings raised while a request is handled (admission webhooks' `warnings`,
//! ValidatingAdmissionPolicy's `Warn` action), gathered for the response's
//! `Warning` headers. Each request runs in its own task; the sink is task-local,
//! so code deep in a write can add to it without threading it through.

use std::cell::RefCell;
use std::future::Future;

tokio::task_local! {
    static SINK: RefCell<Vec<String>>;
}

/// Runs `f`, returning its output and the warnings it raised (in order, no repeats).
pub async fn collect<F: Future>(f: F) -> (F::Output, Vec<String>) {
    SINK.scope(RefCell::new(Vec::new()), async {
        let out = f.await;
        let warnings = SINK.with(|s| s.take());
        (out, warnings)
    })
    .await
}

/// Adds a warning to the current request's response (nothing outside a request).
pub fn push(w: impl Into<String>) {
    let w = w.into();
    let _ = SINK.try_with(|s| {
        let mut s = s.borrow_mut();
        if !s.contains(&w) {
            s.push(w);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn warnings_are_gathered_per_request() {
        let ((), w) = collect(async {
            push("a");
            tokio::task::yield_now().await;
            push("b");
            push("a");
        })
        .await;
        assert_eq!(w, ["a", "b"]);
        // Outside a request nothing is kept (and nothing panics).
        push("lost");
        let ((), w) = collect(async {}).await;
        assert!(w.is_empty());
    }
}
