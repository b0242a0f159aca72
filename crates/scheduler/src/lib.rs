//! Berth's scheduler: upstream kube-scheduler's framework, in-tree plugins
//! and scheduling loop, as a client of the API server.

pub mod cache;
pub mod config;
pub mod framework;
pub mod plugins;
pub mod queue;
pub mod scheduler;

pub use config::SchedulerConfig;
pub use scheduler::run;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("scheduler configuration: {0}")]
    Config(String),
    #[error("API request failed: {0}")]
    Kube(#[from] kube::Error),
}
