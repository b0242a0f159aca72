//! Who makes a request: upstream's `user.Info` (name, uid, groups, extra), shared
//! by authentication (which produces it) and authorization (which reads it).

use std::collections::BTreeMap;

/// The group every authenticated user is in.
pub const AUTHENTICATED: &str = "system:authenticated";
/// The group of anonymous requests.
pub const UNAUTHENTICATED: &str = "system:unauthenticated";
/// The user of anonymous requests.
pub const ANONYMOUS: &str = "system:anonymous";
/// Superusers: RBAC is not consulted for members.
pub const MASTERS: &str = "system:masters";

#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct UserInfo {
    pub name: String,
    pub uid: String,
    pub groups: Vec<String>,
    /// Extra attributes (`authentication.kubernetes.io/pod-name`, …).
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    pub fn new(name: impl Into<String>, groups: &[&str]) -> Self {
        UserInfo {
            name: name.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            ..Default::default()
        }
    }

    /// The admin: `system:admin` in `system:masters`.
    pub fn admin() -> Self {
        UserInfo::new("system:admin", &[MASTERS, AUTHENTICATED])
    }

    /// An anonymous request, as upstream's anonymous authenticator names it.
    pub fn anonymous() -> Self {
        UserInfo::new(ANONYMOUS, &[UNAUTHENTICATED])
    }

    pub fn in_group(&self, group: &str) -> bool {
        self.groups.iter().any(|g| g == group)
    }

    /// Adds `system:authenticated` unless present or anonymous, as upstream's
    /// authenticated-group adder does after every authenticator but anonymous.
    pub fn with_authenticated_group(mut self) -> Self {
        if self.name != ANONYMOUS && !self.in_group(AUTHENTICATED) {
            self.groups.push(AUTHENTICATED.to_string());
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authenticated_group_is_added_once_and_never_to_anonymous() {
        let u = UserInfo::new("jane", &["dev"]).with_authenticated_group();
        assert_eq!(u.groups, ["dev", AUTHENTICATED]);
        assert_eq!(u.clone().with_authenticated_group().groups.len(), 2);
        assert_eq!(
            UserInfo::anonymous().with_authenticated_group().groups,
            [UNAUTHENTICATED]
        );
    }
}
