//! Berth's component runtime: what every component (scheduler, controllers,
//! node agent) uses to talk to the API server through kube-rs.
//!
//! - [`events`]: the core/v1 Event recorder with upstream's correlation
//!   (repeat counting, aggregation, spam filter).
//! - [`clock`]: time as a trait, real and fake.
//! - [`query`]: URL query strings for the components' servers.
//! - [`tls`]: the verifier HTTPS clients use towards self-signed kubelets.

pub mod clock;
pub mod error;
pub mod events;
pub mod leaderelection;
mod lru;
pub mod query;
pub mod reflect;
pub mod tls;

pub use clock::{Clock, FakeClock, RealClock};
pub use error::Error;
pub use events::{EventSource, EventType, Recorder, RecorderOptions};
