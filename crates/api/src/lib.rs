//! Berth apimachinery: pure logic over API objects, no I/O and no async.
//!
//! Objects are handled as `serde_json::Value` in their wire form (as upstream's
//! "unstructured"), decoded through their k8s-openapi type where types matter.

pub mod conversion;
pub mod crd;
pub mod defaults;
pub mod duration;
pub mod jsonpath;
pub mod networking;
pub mod nodeselector;
pub mod openapi;
pub mod printers;
pub mod protobuf;
pub mod qos;
pub mod quantity;
pub mod quota;
pub mod registry;
pub mod selector;
pub mod ssa;
pub mod storage;
pub mod strategic;
pub mod taints;
pub mod user;
pub mod validation;
