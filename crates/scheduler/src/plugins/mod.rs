//! The in-tree plugins and the registry that builds a profile's Framework.

use std::sync::Arc;

use crate::Error;
use crate::config::{BalancedAllocationArgs, NodeResourcesFitArgs, Profile, merge_plugins};
use crate::framework::{Framework, WeightedScore};

pub mod defaultbinder;
pub mod defaultpreemption;
pub mod imagelocality;
pub mod interpodaffinity;
pub mod nodeaffinity;
pub mod nodename;
pub mod nodeports;
pub mod noderesources;
pub mod noderesourcetopology;
pub mod nodeunschedulable;
pub mod nodevolumelimits;
pub mod podtopologyspread;
pub mod queuesort;
pub mod tainttoleration;
pub mod volumebinding;
pub mod volumerestrictions;
pub mod volumezone;

#[cfg(test)]
pub mod testing;

// Upstream's default profile (pkg/scheduler/apis/config/v1/default_plugins.go),
// restricted to the plugins Berth has.
const DEFAULT_QUEUE_SORT: &[(&str, i64)] = &[(queuesort::NAME, 0)];
const DEFAULT_PRE_FILTER: &[(&str, i64)] = &[
    (nodeports::NAME, 0),
    (noderesources::fit::NAME, 0),
    (volumerestrictions::NAME, 0),
    (nodevolumelimits::NAME, 0),
    (volumebinding::NAME, 0),
    (volumezone::NAME, 0),
    (podtopologyspread::NAME, 0),
    (interpodaffinity::NAME, 0),
];
const DEFAULT_FILTER: &[(&str, i64)] = &[
    (nodeunschedulable::NAME, 0),
    (nodename::NAME, 0),
    (tainttoleration::NAME, 0),
    (nodeaffinity::NAME, 0),
    (nodeports::NAME, 0),
    (noderesources::fit::NAME, 0),
    (volumerestrictions::NAME, 0),
    (nodevolumelimits::NAME, 0),
    (volumebinding::NAME, 0),
    (volumezone::NAME, 0),
    (podtopologyspread::NAME, 0),
    (interpodaffinity::NAME, 0),
];
const DEFAULT_POST_FILTER: &[(&str, i64)] = &[(defaultpreemption::NAME, 0)];
const DEFAULT_PRE_SCORE: &[(&str, i64)] = &[
    (podtopologyspread::NAME, 0),
    (interpodaffinity::NAME, 0),
    (imagelocality::NAME, 0),
];
const DEFAULT_SCORE: &[(&str, i64)] = &[
    (tainttoleration::NAME, 3),
    (nodeaffinity::NAME, 2),
    (noderesources::fit::NAME, 1),
    (podtopologyspread::NAME, 2),
    (interpodaffinity::NAME, 2),
    (noderesources::balanced_allocation::NAME, 1),
    (imagelocality::NAME, 1),
];
const DEFAULT_RESERVE: &[(&str, i64)] = &[(volumebinding::NAME, 0)];
const DEFAULT_PRE_BIND: &[(&str, i64)] = &[(volumebinding::NAME, 0)];
const DEFAULT_BIND: &[(&str, i64)] = &[(defaultbinder::NAME, 0)];

/// What plugins get from the scheduler besides snapshots (upstream's
/// framework.Handle): the API VolumeBinding's PreBind writes through.
#[derive(Clone)]
pub struct Handle {
    pub volumes: Arc<dyn volumebinding::api::VolumeApi>,
}

impl Default for Handle {
    fn default() -> Self {
        Self {
            volumes: Arc::new(volumebinding::api::NoVolumeApi),
        }
    }
}

fn unknown(point: &str, name: &str) -> Error {
    Error::Config(format!(
        "{point} plugin {name:?} does not exist or does not implement {point}"
    ))
}

/// Builds the Framework for one profile, without an API (tools and tests:
/// VolumeBinding's PreBind cannot write).
pub fn new_framework(profile: &Profile) -> Result<Framework, Error> {
    new_framework_with(profile, &Handle::default())
}

/// Builds the Framework for one profile.
pub fn new_framework_with(profile: &Profile, handle: &Handle) -> Result<Framework, Error> {
    let fit_args: NodeResourcesFitArgs = profile.args(noderesources::fit::NAME)?;
    let fit = Arc::new(noderesources::Fit {
        strategy: fit_args.scoring_strategy.unwrap_or_default(),
        ignored_resources: fit_args.ignored_resources,
    });
    let ba_args: BalancedAllocationArgs = profile.args(noderesources::balanced_allocation::NAME)?;
    let balanced = Arc::new(if ba_args.resources.is_empty() {
        noderesources::BalancedAllocation::default()
    } else {
        noderesources::BalancedAllocation {
            resources: ba_args.resources,
        }
    });
    let spread = Arc::new(podtopologyspread::PodTopologySpread::new(
        profile.args(podtopologyspread::NAME)?,
    ));
    let inter_pod = Arc::new(interpodaffinity::InterPodAffinity {
        args: profile.args(interpodaffinity::NAME)?,
    });
    let vb_args: volumebinding::VolumeBindingArgs = profile.args(volumebinding::NAME)?;
    let volume_binding = Arc::new(volumebinding::VolumeBinding::new(
        handle.volumes.clone(),
        vb_args.bind_timeout()?,
    ));
    let volume_limits = Arc::new(nodevolumelimits::CsiLimits::default());
    let plugins = profile.plugins.clone().unwrap_or_default();

    let queue_sort = merge_plugins(DEFAULT_QUEUE_SORT, plugins.queue_sort.as_ref());
    let queue_sort: Arc<dyn crate::framework::QueueSort> =
        match queue_sort.first().map(|(n, _)| n.as_str()) {
            Some(queuesort::NAME) | None => Arc::new(queuesort::PrioritySort),
            Some(other) => return Err(unknown("queueSort", other)),
        };
    let mut fw = Framework {
        scheduler_name: profile.scheduler_name().to_string(),
        percentage_of_nodes_to_score: profile.percentage_of_nodes_to_score,
        queue_sort,
        pre_filter: Vec::new(),
        filter: Vec::new(),
        post_filter: Vec::new(),
        pre_score: Vec::new(),
        score: Vec::new(),
        reserve: Vec::new(),
        permit: Vec::new(),
        pre_bind: Vec::new(),
        bind: Vec::new(),
    };
    for (name, _) in merge_plugins(DEFAULT_PRE_FILTER, plugins.pre_filter.as_ref()) {
        match name.as_str() {
            noderesources::fit::NAME => fw.pre_filter.push(fit.clone()),
            nodeports::NAME => fw.pre_filter.push(Arc::new(nodeports::NodePorts)),
            podtopologyspread::NAME => fw.pre_filter.push(spread.clone()),
            interpodaffinity::NAME => fw.pre_filter.push(inter_pod.clone()),
            volumerestrictions::NAME => fw
                .pre_filter
                .push(Arc::new(volumerestrictions::VolumeRestrictions)),
            nodevolumelimits::NAME => fw.pre_filter.push(volume_limits.clone()),
            volumebinding::NAME => fw.pre_filter.push(volume_binding.clone()),
            volumezone::NAME => fw.pre_filter.push(Arc::new(volumezone::VolumeZone)),
            other => return Err(unknown("preFilter", other)),
        }
    }
    for (name, _) in merge_plugins(DEFAULT_FILTER, plugins.filter.as_ref()) {
        fw.filter.push(match name.as_str() {
            nodeunschedulable::NAME => Arc::new(nodeunschedulable::NodeUnschedulable),
            nodename::NAME => Arc::new(nodename::NodeName),
            tainttoleration::NAME => Arc::new(tainttoleration::TaintToleration),
            nodeaffinity::NAME => Arc::new(nodeaffinity::NodeAffinity),
            noderesources::fit::NAME => fit.clone(),
            nodeports::NAME => Arc::new(nodeports::NodePorts),
            podtopologyspread::NAME => spread.clone(),
            interpodaffinity::NAME => inter_pod.clone(),
            volumerestrictions::NAME => Arc::new(volumerestrictions::VolumeRestrictions),
            nodevolumelimits::NAME => volume_limits.clone(),
            volumebinding::NAME => volume_binding.clone(),
            volumezone::NAME => Arc::new(volumezone::VolumeZone),
            noderesourcetopology::NAME => Arc::new(noderesourcetopology::NodeResourceTopologyMatch),
            other => return Err(unknown("filter", other)),
        });
    }
    for (name, _) in merge_plugins(DEFAULT_POST_FILTER, plugins.post_filter.as_ref()) {
        match name.as_str() {
            defaultpreemption::NAME => fw
                .post_filter
                .push(Arc::new(defaultpreemption::DefaultPreemption)),
            other => return Err(unknown("postFilter", other)),
        }
    }
    for (name, weight) in merge_plugins(DEFAULT_SCORE, plugins.score.as_ref()) {
        let plugin: Arc<dyn crate::framework::Score> = match name.as_str() {
            tainttoleration::NAME => Arc::new(tainttoleration::TaintToleration),
            nodeaffinity::NAME => Arc::new(nodeaffinity::NodeAffinity),
            noderesources::fit::NAME => fit.clone(),
            noderesources::balanced_allocation::NAME => balanced.clone(),
            podtopologyspread::NAME => spread.clone(),
            interpodaffinity::NAME => inter_pod.clone(),
            imagelocality::NAME => Arc::new(imagelocality::ImageLocality),
            other => return Err(unknown("score", other)),
        };
        fw.score.push(WeightedScore { plugin, weight });
    }
    for (name, _) in merge_plugins(DEFAULT_PRE_SCORE, plugins.pre_score.as_ref()) {
        fw.pre_score.push(match name.as_str() {
            podtopologyspread::NAME => spread.clone(),
            interpodaffinity::NAME => inter_pod.clone(),
            imagelocality::NAME => Arc::new(imagelocality::ImageLocality),
            other => return Err(unknown("preScore", other)),
        });
    }
    for (name, _) in merge_plugins(DEFAULT_BIND, plugins.bind.as_ref()) {
        match name.as_str() {
            defaultbinder::NAME => fw.bind.push(Arc::new(defaultbinder::DefaultBinder)),
            other => return Err(unknown("bind", other)),
        }
    }
    for (name, _) in merge_plugins(DEFAULT_RESERVE, plugins.reserve.as_ref()) {
        match name.as_str() {
            volumebinding::NAME => fw.reserve.push(volume_binding.clone()),
            other => return Err(unknown("reserve", other)),
        }
    }
    for (name, _) in merge_plugins(DEFAULT_PRE_BIND, plugins.pre_bind.as_ref()) {
        match name.as_str() {
            volumebinding::NAME => fw.pre_bind.push(volume_binding.clone()),
            other => return Err(unknown("preBind", other)),
        }
    }
    if let Some(e) = plugins.permit.as_ref().and_then(|s| s.enabled.first()) {
        return Err(unknown("permit", &e.name));
    }
    Ok(fw)
}
