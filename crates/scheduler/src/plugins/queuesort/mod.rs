//! PrioritySort: higher priority first, then the earlier-queued pod.

use crate::framework::{Plugin, PodInfo, QueueSort};

pub const NAME: &str = "PrioritySort";

pub struct PrioritySort;

impl Plugin for PrioritySort {
    fn name(&self) -> &'static str {
        NAME
    }
}

impl QueueSort for PrioritySort {
    fn less(&self, a: &PodInfo, b: &PodInfo) -> bool {
        let (pa, pb) = (a.priority(), b.priority());
        pa > pb
            || (pa == pb && a.pod.metadata.creation_timestamp < b.pod.metadata.creation_timestamp)
    }
}
