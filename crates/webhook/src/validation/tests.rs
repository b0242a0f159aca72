use super::*;

#[test]
fn placeholder() {
    assert!(validate_configuration(&json!({})).len() == 1);
}
