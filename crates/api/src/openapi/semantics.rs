//! List and map semantics of API fields: the `x-kubernetes-*` extensions upstream's
//! OpenAPI carries and k8s-openapi's schemas drop. Strategic merge patch (kubectl's
//! client-side apply reads them from `/openapi/v3`) and server-side apply need them.
//!
//! Written for Kubernetes 1.33 from the published API's field markers
//! (`+patchStrategy`, `+patchMergeKey`, `+listType`, `+listMapKey`, `+mapType`,
//! `+structType`) for every group-version Berth serves: core/v1, apps/v1,
//! autoscaling/v1+v2, batch/v1, coordination/v1, discovery/v1, events/v1,
//! networking/v1, policy/v1, rbac/v1, scheduling/v1, storage/v1 and meta/v1.
//! Fields of inlined Go structs (e.g. `VolumeSource` in `Volume`) are listed under the
//! schema that carries them on the wire.

/// The semantics of one field of one schema. Empty strings mean "not set".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    /// JSON field name.
    pub name: &'static str,
    /// `x-kubernetes-patch-strategy`: `merge`, `retainKeys`, `merge,retainKeys`, `replace`.
    pub patch_strategy: &'static str,
    /// `x-kubernetes-patch-merge-key`.
    pub patch_merge_key: &'static str,
    /// `x-kubernetes-list-type`: `atomic`, `set` or `map`.
    pub list_type: &'static str,
    /// `x-kubernetes-list-map-keys` (for `list_type == "map"`).
    pub list_map_keys: &'static [&'static str],
    /// `x-kubernetes-map-type`: `atomic` or `granular`.
    pub map_type: &'static str,
}

const fn f(
    name: &'static str,
    patch_strategy: &'static str,
    patch_merge_key: &'static str,
    list_type: &'static str,
    list_map_keys: &'static [&'static str],
    map_type: &'static str,
) -> Field {
    Field {
        name,
        patch_strategy,
        patch_merge_key,
        list_type,
        list_map_keys,
        map_type,
    }
}

/// Per schema (upstream dotted name), the fields with list/map semantics.
pub static FIELD_SEMANTICS: &[(&str, &[Field])] = &[
    (
        "io.k8s.api.apps.v1.DaemonSetStatus",
        &[f("conditions", "merge", "type", "map", &["type"], "")],
    ),
    (
        "io.k8s.api.apps.v1.DeploymentSpec",
        &[f("strategy", "retainKeys", "", "", &[], "")],
    ),
    (
        "io.k8s.api.apps.v1.DeploymentStatus",
        &[f("conditions", "merge", "type", "map", &["type"], "")],
    ),
    (
        "io.k8s.api.apps.v1.ReplicaSetStatus",
        &[f("conditions", "merge", "type", "map", &["type"], "")],
    ),
    (
        "io.k8s.api.apps.v1.StatefulSetSpec",
        &[f("volumeClaimTemplates", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.api.apps.v1.StatefulSetStatus",
        &[f("conditions", "merge", "type", "map", &["type"], "")],
    ),
    (
        "io.k8s.api.autoscaling.v2.HPAScalingRules",
        &[f("policies", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerSpec",
        &[f("metrics", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerStatus",
        &[
            f("currentMetrics", "", "", "atomic", &[], ""),
            f("conditions", "merge", "type", "map", &["type"], ""),
        ],
    ),
    (
        "io.k8s.api.batch.v1.CronJobStatus",
        &[f("active", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.api.batch.v1.JobStatus",
        &[f("conditions", "merge", "type", "atomic", &[], "")],
    ),
    (
        "io.k8s.api.batch.v1.PodFailurePolicy",
        &[f("rules", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.api.batch.v1.PodFailurePolicyOnExitCodesRequirement",
        &[f("values", "", "", "set", &[], "")],
    ),
    (
        "io.k8s.api.batch.v1.PodFailurePolicyRule",
        &[f("onPodConditions", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.api.batch.v1.SuccessPolicy",
        &[f("rules", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.api.batch.v1.UncountedTerminatedPods",
        &[
            f("succeeded", "", "", "set", &[], ""),
            f("failed", "", "", "set", &[], ""),
        ],
    ),
    (
        "io.k8s.api.core.v1.AvoidPods",
        &[f("preferAvoidPods", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.api.core.v1.Capabilities",
        &[
            f("add", "", "", "atomic", &[], ""),
            f("drop", "", "", "atomic", &[], ""),
        ],
    ),
    (
        "io.k8s.api.core.v1.CephFSPersistentVolumeSource",
        &[f("monitors", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.api.core.v1.CephFSVolumeSource",
        &[f("monitors", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.api.core.v1.ComponentStatus",
        &[f("conditions", "merge", "type", "map", &["type"], "")],
    ),
    (
        "io.k8s.api.core.v1.ConfigMapProjection",
        &[f("items", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.api.core.v1.ConfigMapVolumeSource",
        &[f("items", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.api.core.v1.Container",
        &[
            f("command", "", "", "atomic", &[], ""),
            f("args", "", "", "atomic", &[], ""),
            f(
                "ports",
                "merge",
                "containerPort",
                "map",
                &["containerPort", "protocol"],
                "",
            ),
            f("envFrom", "", "", "atomic", &[], ""),
            f("env", "merge", "name", "map", &["name"], ""),
            f("resizePolicy", "", "", "atomic", &[], ""),
            f(
                "volumeMounts",
                "merge",
                "mountPath",
                "map",
                &["mountPath"],
                "",
            ),
            f(
                "volumeDevices",
                "merge",
                "devicePath",
                "map",
                &["devicePath"],
                "",
            ),
        ],
    ),
    (
        "io.k8s.api.core.v1.ContainerImage",
        &[f("names", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.api.core.v1.ContainerStatus",
        &[
            f(
                "volumeMounts",
                "merge",
                "mountPath",
                "map",
                &["mountPath"],
                "",
            ),
            f(
                "allocatedResourcesStatus",
                "merge",
                "name",
                "map",
                &["name"],
                "",
            ),
        ],
    ),
    (
        "io.k8s.api.core.v1.DownwardAPIProjection",
        &[f("items", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.api.core.v1.DownwardAPIVolumeSource",
        &[f("items", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.api.core.v1.EndpointSubset",
        &[
            f("addresses", "", "", "atomic", &[], ""),
            f("notReadyAddresses", "", "", "atomic", &[], ""),
            f("ports", "", "", "atomic", &[], ""),
        ],
    ),
    (
        "io.k8s.api.core.v1.Endpoints",
        &[f("subsets", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.api.core.v1.EphemeralContainer",
        &[
            f("command", "", "", "atomic", &[], ""),
            f("args", "", "", "atomic", &[], ""),
            f(
                "ports",
                "merge",
                "containerPort",
                "map",
                &["containerPort", "protocol"],
                "",
            ),
            f("envFrom", "", "", "atomic", &[], ""),
            f("env", "merge", "name", "map", &["name"], ""),
            f("resizePolicy", "", "", "atomic", &[], ""),
            f(
                "volumeMounts",
                "merge",
                "mountPath",
                "map",
                &["mountPath"],
                "",
            ),
            f(
                "volumeDevices",
                "merge",
                "devicePath",
                "map",
                &["devicePath"],
                "",
            ),
        ],
    ),
    (
        "io.k8s.api.core.v1.ExecAction",
        &[f("command", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.api.core.v1.FCVolumeSource",
        &[
            f("targetWWNs", "", "", "atomic", &[], ""),
            f("wwids", "", "", "atomic", &[], ""),
        ],
    ),
    (
        "io.k8s.api.core.v1.HTTPGetAction",
        &[f("httpHeaders", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.api.core.v1.HostAlias",
        &[f("hostnames", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.api.core.v1.ISCSIPersistentVolumeSource",
        &[f("portals", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.api.core.v1.ISCSIVolumeSource",
        &[f("portals", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.api.core.v1.LimitRangeSpec",
        &[f("limits", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.api.core.v1.LinuxContainerUser",
        &[f("supplementalGroups", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.api.core.v1.LoadBalancerIngress",
        &[f("ports", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.api.core.v1.LoadBalancerStatus",
        &[f("ingress", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.api.core.v1.NamespaceSpec",
        &[f("finalizers", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.api.core.v1.NamespaceStatus",
        &[f("conditions", "merge", "type", "map", &["type"], "")],
    ),
    (
        "io.k8s.api.core.v1.NodeAffinity",
        &[f(
            "preferredDuringSchedulingIgnoredDuringExecution",
            "",
            "",
            "atomic",
            &[],
            "",
        )],
    ),
    (
        "io.k8s.api.core.v1.NodeSelector",
        &[f("nodeSelectorTerms", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.api.core.v1.NodeSelectorRequirement",
        &[f("values", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.api.core.v1.NodeSelectorTerm",
        &[
            f("matchExpressions", "", "", "atomic", &[], ""),
            f("matchFields", "", "", "atomic", &[], ""),
        ],
    ),
    (
        "io.k8s.api.core.v1.NodeSpec",
        &[
            f("podCIDRs", "merge", "", "set", &[], ""),
            f("taints", "", "", "atomic", &[], ""),
        ],
    ),
    (
        "io.k8s.api.core.v1.NodeStatus",
        &[
            f("conditions", "merge", "type", "map", &["type"], ""),
            f("addresses", "merge", "type", "map", &["type"], ""),
            f("images", "", "", "atomic", &[], ""),
            f("volumesInUse", "", "", "atomic", &[], ""),
            f("volumesAttached", "", "", "atomic", &[], ""),
            f("runtimeHandlers", "", "", "atomic", &[], ""),
        ],
    ),
    (
        "io.k8s.api.core.v1.PersistentVolumeClaimSpec",
        &[f("accessModes", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.api.core.v1.PersistentVolumeClaimStatus",
        &[
            f("accessModes", "", "", "atomic", &[], ""),
            f("conditions", "merge", "type", "map", &["type"], ""),
            f("allocatedResourceStatuses", "", "", "", &[], "granular"),
        ],
    ),
    (
        "io.k8s.api.core.v1.PersistentVolumeSpec",
        &[
            f("accessModes", "", "", "atomic", &[], ""),
            f("mountOptions", "", "", "atomic", &[], ""),
        ],
    ),
    (
        "io.k8s.api.core.v1.PodAffinity",
        &[
            f(
                "requiredDuringSchedulingIgnoredDuringExecution",
                "",
                "",
                "atomic",
                &[],
                "",
            ),
            f(
                "preferredDuringSchedulingIgnoredDuringExecution",
                "",
                "",
                "atomic",
                &[],
                "",
            ),
        ],
    ),
    (
        "io.k8s.api.core.v1.PodAffinityTerm",
        &[
            f("namespaces", "", "", "atomic", &[], ""),
            f("matchLabelKeys", "", "", "atomic", &[], ""),
            f("mismatchLabelKeys", "", "", "atomic", &[], ""),
        ],
    ),
    (
        "io.k8s.api.core.v1.PodAntiAffinity",
        &[
            f(
                "requiredDuringSchedulingIgnoredDuringExecution",
                "",
                "",
                "atomic",
                &[],
                "",
            ),
            f(
                "preferredDuringSchedulingIgnoredDuringExecution",
                "",
                "",
                "atomic",
                &[],
                "",
            ),
        ],
    ),
    (
        "io.k8s.api.core.v1.PodDNSConfig",
        &[
            f("nameservers", "", "", "atomic", &[], ""),
            f("searches", "", "", "atomic", &[], ""),
            f("options", "", "", "atomic", &[], ""),
        ],
    ),
    (
        "io.k8s.api.core.v1.PodExecOptions",
        &[f("command", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.api.core.v1.PodPortForwardOptions",
        &[f("ports", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.api.core.v1.PodSecurityContext",
        &[
            f("supplementalGroups", "", "", "atomic", &[], ""),
            f("sysctls", "", "", "atomic", &[], ""),
        ],
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        &[
            f("volumes", "merge,retainKeys", "name", "map", &["name"], ""),
            f("initContainers", "merge", "name", "map", &["name"], ""),
            f("containers", "merge", "name", "map", &["name"], ""),
            f("ephemeralContainers", "merge", "name", "map", &["name"], ""),
            f("nodeSelector", "", "", "", &[], "atomic"),
            f("imagePullSecrets", "merge", "name", "map", &["name"], ""),
            f("tolerations", "", "", "atomic", &[], ""),
            f("hostAliases", "merge", "ip", "map", &["ip"], ""),
            f("readinessGates", "", "", "atomic", &[], ""),
            f(
                "topologySpreadConstraints",
                "merge",
                "topologyKey",
                "map",
                &["topologyKey", "whenUnsatisfiable"],
                "",
            ),
            f("schedulingGates", "merge", "name", "map", &["name"], ""),
            f(
                "resourceClaims",
                "merge,retainKeys",
                "name",
                "map",
                &["name"],
                "",
            ),
        ],
    ),
    (
        "io.k8s.api.core.v1.PodStatus",
        &[
            f("conditions", "merge", "type", "map", &["type"], ""),
            f("hostIPs", "merge", "ip", "atomic", &[], ""),
            f("podIPs", "merge", "ip", "map", &["ip"], ""),
            f("initContainerStatuses", "", "", "atomic", &[], ""),
            f("containerStatuses", "", "", "atomic", &[], ""),
            f("ephemeralContainerStatuses", "", "", "atomic", &[], ""),
            f(
                "resourceClaimStatuses",
                "merge,retainKeys",
                "name",
                "map",
                &["name"],
                "",
            ),
        ],
    ),
    (
        "io.k8s.api.core.v1.ProjectedVolumeSource",
        &[f("sources", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.api.core.v1.RBDPersistentVolumeSource",
        &[f("monitors", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.api.core.v1.RBDVolumeSource",
        &[f("monitors", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.api.core.v1.ReplicationControllerSpec",
        &[f("selector", "", "", "", &[], "atomic")],
    ),
    (
        "io.k8s.api.core.v1.ReplicationControllerStatus",
        &[f("conditions", "merge", "type", "map", &["type"], "")],
    ),
    (
        "io.k8s.api.core.v1.ResourceQuotaSpec",
        &[f("scopes", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.api.core.v1.ResourceRequirements",
        &[f("claims", "", "", "map", &["name"], "")],
    ),
    (
        "io.k8s.api.core.v1.ResourceStatus",
        &[f("resources", "", "", "map", &["resourceID"], "")],
    ),
    (
        "io.k8s.api.core.v1.ScopeSelector",
        &[f("matchExpressions", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.api.core.v1.ScopedResourceSelectorRequirement",
        &[f("values", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.api.core.v1.SecretProjection",
        &[f("items", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.api.core.v1.SecretVolumeSource",
        &[f("items", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.api.core.v1.ServiceAccount",
        &[
            f("secrets", "merge", "name", "map", &["name"], ""),
            f("imagePullSecrets", "", "", "atomic", &[], ""),
        ],
    ),
    (
        "io.k8s.api.core.v1.ServiceSpec",
        &[
            f("ports", "merge", "port", "map", &["port", "protocol"], ""),
            f("selector", "", "", "", &[], "atomic"),
            f("clusterIPs", "", "", "atomic", &[], ""),
            f("externalIPs", "", "", "atomic", &[], ""),
            f("loadBalancerSourceRanges", "", "", "atomic", &[], ""),
            f("ipFamilies", "", "", "atomic", &[], ""),
        ],
    ),
    (
        "io.k8s.api.core.v1.ServiceStatus",
        &[f("conditions", "merge", "type", "map", &["type"], "")],
    ),
    (
        "io.k8s.api.core.v1.TopologySelectorLabelRequirement",
        &[f("values", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.api.core.v1.TopologySelectorTerm",
        &[f("matchLabelExpressions", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.api.core.v1.TopologySpreadConstraint",
        &[f("matchLabelKeys", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.api.discovery.v1.Endpoint",
        &[f("addresses", "", "", "set", &[], "")],
    ),
    (
        "io.k8s.api.discovery.v1.EndpointHints",
        &[
            f("forZones", "", "", "atomic", &[], ""),
            f("forNodes", "", "", "atomic", &[], ""),
        ],
    ),
    (
        "io.k8s.api.discovery.v1.EndpointSlice",
        &[
            f("endpoints", "", "", "atomic", &[], ""),
            f("ports", "", "", "atomic", &[], ""),
        ],
    ),
    (
        "io.k8s.api.networking.v1.HTTPIngressRuleValue",
        &[f("paths", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.api.networking.v1.IPBlock",
        &[f("except", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.api.networking.v1.IngressLoadBalancerIngress",
        &[f("ports", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.api.networking.v1.IngressLoadBalancerStatus",
        &[f("ingress", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.api.networking.v1.IngressSpec",
        &[
            f("tls", "", "", "atomic", &[], ""),
            f("rules", "", "", "atomic", &[], ""),
        ],
    ),
    (
        "io.k8s.api.networking.v1.IngressTLS",
        &[f("hosts", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.api.networking.v1.NetworkPolicyEgressRule",
        &[
            f("ports", "", "", "atomic", &[], ""),
            f("to", "", "", "atomic", &[], ""),
        ],
    ),
    (
        "io.k8s.api.networking.v1.NetworkPolicyIngressRule",
        &[
            f("ports", "", "", "atomic", &[], ""),
            f("from", "", "", "atomic", &[], ""),
        ],
    ),
    (
        "io.k8s.api.networking.v1.NetworkPolicySpec",
        &[
            f("ingress", "", "", "atomic", &[], ""),
            f("egress", "", "", "atomic", &[], ""),
            f("policyTypes", "", "", "atomic", &[], ""),
        ],
    ),
    (
        "io.k8s.api.networking.v1.ServiceCIDRSpec",
        &[f("cidrs", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.api.networking.v1.ServiceCIDRStatus",
        &[f("conditions", "merge", "type", "map", &["type"], "")],
    ),
    (
        "io.k8s.api.policy.v1.PodDisruptionBudgetSpec",
        &[f("selector", "replace", "", "", &[], "")],
    ),
    (
        "io.k8s.api.policy.v1.PodDisruptionBudgetStatus",
        &[f("conditions", "merge", "type", "map", &["type"], "")],
    ),
    (
        "io.k8s.api.rbac.v1.AggregationRule",
        &[f("clusterRoleSelectors", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.api.rbac.v1.ClusterRole",
        &[f("rules", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.api.rbac.v1.ClusterRoleBinding",
        &[f("subjects", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.api.rbac.v1.PolicyRule",
        &[
            f("verbs", "", "", "atomic", &[], ""),
            f("apiGroups", "", "", "atomic", &[], ""),
            f("resources", "", "", "atomic", &[], ""),
            f("resourceNames", "", "", "atomic", &[], ""),
            f("nonResourceURLs", "", "", "atomic", &[], ""),
        ],
    ),
    (
        "io.k8s.api.rbac.v1.Role",
        &[f("rules", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.api.rbac.v1.RoleBinding",
        &[f("subjects", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.api.storage.v1.CSIDriverSpec",
        &[
            f("volumeLifecycleModes", "", "", "set", &[], ""),
            f("tokenRequests", "", "", "atomic", &[], ""),
        ],
    ),
    (
        "io.k8s.api.storage.v1.CSINodeDriver",
        &[f("topologyKeys", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.api.storage.v1.CSINodeSpec",
        &[f("drivers", "merge", "name", "map", &["name"], "")],
    ),
    (
        "io.k8s.api.storage.v1.StorageClass",
        &[
            f("mountOptions", "", "", "atomic", &[], ""),
            f("allowedTopologies", "", "", "atomic", &[], ""),
        ],
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.APIGroup",
        &[
            f("versions", "", "", "atomic", &[], ""),
            f("serverAddressByClientCIDRs", "", "", "atomic", &[], ""),
        ],
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.APIGroupList",
        &[f("groups", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.APIResource",
        &[
            f("shortNames", "", "", "atomic", &[], ""),
            f("categories", "", "", "atomic", &[], ""),
        ],
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.APIResourceList",
        &[f("resources", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.APIVersions",
        &[
            f("versions", "", "", "atomic", &[], ""),
            f("serverAddressByClientCIDRs", "", "", "atomic", &[], ""),
        ],
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.ApplyOptions",
        &[f("dryRun", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.CreateOptions",
        &[f("dryRun", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions",
        &[f("dryRun", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.FieldSelectorRequirement",
        &[f("values", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector",
        &[f("matchExpressions", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelectorRequirement",
        &[f("values", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
        &[
            f("ownerReferences", "merge", "uid", "map", &["uid"], ""),
            f("finalizers", "merge", "", "set", &[], ""),
            f("managedFields", "", "", "atomic", &[], ""),
        ],
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.PatchOptions",
        &[f("dryRun", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.RootPaths",
        &[f("paths", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.Status",
        &[f("details", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.StatusDetails",
        &[f("causes", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.Table",
        &[
            f("columnDefinitions", "", "", "atomic", &[], ""),
            f("rows", "", "", "atomic", &[], ""),
        ],
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.TableRow",
        &[f("conditions", "", "", "atomic", &[], "")],
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.UpdateOptions",
        &[f("dryRun", "", "", "atomic", &[], "")],
    ),
];

/// Schemas whose objects are replaced whole by apply and merge (`x-kubernetes-map-type: atomic`).
pub static ATOMIC_STRUCTS: &[&str] = &[
    "io.k8s.api.autoscaling.v1.CrossVersionObjectReference",
    "io.k8s.api.core.v1.ConfigMapKeySelector",
    "io.k8s.api.core.v1.EndpointAddress",
    "io.k8s.api.core.v1.EndpointPort",
    "io.k8s.api.core.v1.LocalObjectReference",
    "io.k8s.api.core.v1.NodeSelector",
    "io.k8s.api.core.v1.NodeSelectorTerm",
    "io.k8s.api.core.v1.ObjectFieldSelector",
    "io.k8s.api.core.v1.ObjectReference",
    "io.k8s.api.core.v1.ResourceFieldSelector",
    "io.k8s.api.core.v1.ScopeSelector",
    "io.k8s.api.core.v1.SecretKeySelector",
    "io.k8s.api.core.v1.SecretReference",
    "io.k8s.api.core.v1.TopologySelectorTerm",
    "io.k8s.api.core.v1.TypedLocalObjectReference",
    "io.k8s.api.discovery.v1.EndpointPort",
    "io.k8s.api.networking.v1.ServiceBackendPort",
    "io.k8s.api.rbac.v1.RoleRef",
    "io.k8s.api.rbac.v1.Subject",
    "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector",
    "io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference",
];
/// (field, whether the enum applies to the items of a list, (value, documentation)s).
pub type EnumField = (&'static str, bool, &'static [(&'static str, &'static str)]);

/// Upstream's stop signals (`Lifecycle.stopSignal`, `ContainerStatus.stopSignal`).
const SIGNALS: &[(&str, &str)] = &[
    ("SIGABRT", ""),
    ("SIGALRM", ""),
    ("SIGBUS", ""),
    ("SIGCHLD", ""),
    ("SIGCLD", ""),
    ("SIGCONT", ""),
    ("SIGFPE", ""),
    ("SIGHUP", ""),
    ("SIGILL", ""),
    ("SIGINT", ""),
    ("SIGIO", ""),
    ("SIGIOT", ""),
    ("SIGKILL", ""),
    ("SIGPIPE", ""),
    ("SIGPOLL", ""),
    ("SIGPROF", ""),
    ("SIGPWR", ""),
    ("SIGQUIT", ""),
    ("SIGRTMAX", ""),
    ("SIGRTMAX-1", ""),
    ("SIGRTMAX-10", ""),
    ("SIGRTMAX-11", ""),
    ("SIGRTMAX-12", ""),
    ("SIGRTMAX-13", ""),
    ("SIGRTMAX-14", ""),
    ("SIGRTMAX-2", ""),
    ("SIGRTMAX-3", ""),
    ("SIGRTMAX-4", ""),
    ("SIGRTMAX-5", ""),
    ("SIGRTMAX-6", ""),
    ("SIGRTMAX-7", ""),
    ("SIGRTMAX-8", ""),
    ("SIGRTMAX-9", ""),
    ("SIGRTMIN", ""),
    ("SIGRTMIN+1", ""),
    ("SIGRTMIN+10", ""),
    ("SIGRTMIN+11", ""),
    ("SIGRTMIN+12", ""),
    ("SIGRTMIN+13", ""),
    ("SIGRTMIN+14", ""),
    ("SIGRTMIN+15", ""),
    ("SIGRTMIN+2", ""),
    ("SIGRTMIN+3", ""),
    ("SIGRTMIN+4", ""),
    ("SIGRTMIN+5", ""),
    ("SIGRTMIN+6", ""),
    ("SIGRTMIN+7", ""),
    ("SIGRTMIN+8", ""),
    ("SIGRTMIN+9", ""),
    ("SIGSEGV", ""),
    ("SIGSTKFLT", ""),
    ("SIGSTOP", ""),
    ("SIGSYS", ""),
    ("SIGTERM", ""),
    ("SIGTRAP", ""),
    ("SIGTSTP", ""),
    ("SIGTTIN", ""),
    ("SIGTTOU", ""),
    ("SIGURG", ""),
    ("SIGUSR1", ""),
    ("SIGUSR2", ""),
    ("SIGVTALRM", ""),
    ("SIGWINCH", ""),
    ("SIGXCPU", ""),
    ("SIGXFSZ", ""),
];

/// Per schema, the fields whose values are an enumeration: (field, whether the enum
/// applies to the items of a list, (value, its documentation) sorted by value as upstream
/// lists them).
pub static ENUMS: &[(&str, &[EnumField])] = &[
    (
        "io.k8s.api.apps.v1.DaemonSetUpdateStrategy",
        &[(
            "type",
            false,
            &[
                ("OnDelete", "Replace the old daemons only when it's killed"),
                (
                    "RollingUpdate",
                    "Replace the old daemons by new ones using rolling update i.e replace them on each node one after the other.",
                ),
            ],
        )],
    ),
    (
        "io.k8s.api.apps.v1.DeploymentStrategy",
        &[(
            "type",
            false,
            &[
                (
                    "Recreate",
                    "Kill all existing pods before creating new ones.",
                ),
                (
                    "RollingUpdate",
                    "Replace the old ReplicaSets by new one using rolling update i.e gradually scale down the old ReplicaSets and scale up the new one.",
                ),
            ],
        )],
    ),
    (
        "io.k8s.api.apps.v1.StatefulSetSpec",
        &[(
            "podManagementPolicy",
            false,
            &[
                (
                    "OrderedReady",
                    "will create pods in strictly increasing order on scale up and strictly decreasing order on scale down, progressing only when the previous pod is ready or terminated. At most one pod will be changed at any time.",
                ),
                (
                    "Parallel",
                    "will create and delete pods as soon as the stateful set replica count is changed, and will not wait for pods to be ready or complete termination.",
                ),
            ],
        )],
    ),
    (
        "io.k8s.api.apps.v1.StatefulSetUpdateStrategy",
        &[(
            "type",
            false,
            &[
                (
                    "OnDelete",
                    "triggers the legacy behavior. Version tracking and ordered rolling restarts are disabled. Pods are recreated from the StatefulSetSpec when they are manually deleted. When a scale operation is performed with this strategy,specification version indicated by the StatefulSet's currentRevision.",
                ),
                (
                    "RollingUpdate",
                    "indicates that update will be applied to all Pods in the StatefulSet with respect to the StatefulSet ordering constraints. When a scale operation is performed with this strategy, new Pods will be created from the specification version indicated by the StatefulSet's updateRevision.",
                ),
            ],
        )],
    ),
    (
        "io.k8s.api.autoscaling.v1.MetricSpec",
        &[(
            "type",
            false,
            &[
                (
                    "ContainerResource",
                    "is a resource metric known to Kubernetes, as specified in requests and limits, describing a single container in each pod in the current scale target (e.g. CPU or memory).  Such metrics are built in to Kubernetes, and have special scaling options on top of those available to normal per-pod metrics (the \"pods\" source).",
                ),
                (
                    "External",
                    "is a global metric that is not associated with any Kubernetes object. It allows autoscaling based on information coming from components running outside of cluster (for example length of queue in cloud messaging service, or QPS from loadbalancer running outside of cluster).",
                ),
                (
                    "Object",
                    "is a metric describing a kubernetes object (for example, hits-per-second on an Ingress object).",
                ),
                (
                    "Pods",
                    "is a metric describing each pod in the current scale target (for example, transactions-processed-per-second).  The values will be averaged together before being compared to the target value.",
                ),
                (
                    "Resource",
                    "is a resource metric known to Kubernetes, as specified in requests and limits, describing each pod in the current scale target (e.g. CPU or memory).  Such metrics are built in to Kubernetes, and have special scaling options on top of those available to normal per-pod metrics (the \"pods\" source).",
                ),
            ],
        )],
    ),
    (
        "io.k8s.api.autoscaling.v1.MetricStatus",
        &[(
            "type",
            false,
            &[
                (
                    "ContainerResource",
                    "is a resource metric known to Kubernetes, as specified in requests and limits, describing a single container in each pod in the current scale target (e.g. CPU or memory).  Such metrics are built in to Kubernetes, and have special scaling options on top of those available to normal per-pod metrics (the \"pods\" source).",
                ),
                (
                    "External",
                    "is a global metric that is not associated with any Kubernetes object. It allows autoscaling based on information coming from components running outside of cluster (for example length of queue in cloud messaging service, or QPS from loadbalancer running outside of cluster).",
                ),
                (
                    "Object",
                    "is a metric describing a kubernetes object (for example, hits-per-second on an Ingress object).",
                ),
                (
                    "Pods",
                    "is a metric describing each pod in the current scale target (for example, transactions-processed-per-second).  The values will be averaged together before being compared to the target value.",
                ),
                (
                    "Resource",
                    "is a resource metric known to Kubernetes, as specified in requests and limits, describing each pod in the current scale target (e.g. CPU or memory).  Such metrics are built in to Kubernetes, and have special scaling options on top of those available to normal per-pod metrics (the \"pods\" source).",
                ),
            ],
        )],
    ),
    (
        "io.k8s.api.batch.v1.CronJobSpec",
        &[(
            "concurrencyPolicy",
            false,
            &[
                ("Allow", "allows CronJobs to run concurrently."),
                (
                    "Forbid",
                    "forbids concurrent runs, skipping next run if previous hasn't finished yet.",
                ),
                (
                    "Replace",
                    "cancels currently running job and replaces it with a new one.",
                ),
            ],
        )],
    ),
    (
        "io.k8s.api.batch.v1.JobSpec",
        &[
            (
                "completionMode",
                false,
                &[
                    (
                        "Indexed",
                        "is a Job completion mode. In this mode, the Pods of a Job get an associated completion index from 0 to (.spec.completions - 1). The Job is  considered complete when a Pod completes for each completion index.",
                    ),
                    (
                        "NonIndexed",
                        "is a Job completion mode. In this mode, the Job is considered complete when there have been .spec.completions successfully completed Pods. Pod completions are homologous to each other.",
                    ),
                ],
            ),
            (
                "podReplacementPolicy",
                false,
                &[
                    (
                        "Failed",
                        "means to wait until a previously created Pod is fully terminated (has phase Failed or Succeeded) before creating a replacement Pod.",
                    ),
                    (
                        "TerminatingOrFailed",
                        "means that we recreate pods when they are terminating (has a metadata.deletionTimestamp) or failed.",
                    ),
                ],
            ),
        ],
    ),
    (
        "io.k8s.api.batch.v1.PodFailurePolicyOnExitCodesRequirement",
        &[("operator", false, &[("In", ""), ("NotIn", "")])],
    ),
    (
        "io.k8s.api.batch.v1.PodFailurePolicyRule",
        &[(
            "action",
            false,
            &[
                (
                    "Count",
                    "This is an action which might be taken on a pod failure - the pod failure is handled in the default way - the counter towards .backoffLimit, represented by the job's .status.failed field, is incremented.",
                ),
                (
                    "FailIndex",
                    "This is an action which might be taken on a pod failure - mark the Job's index as failed to avoid restarts within this index. This action can only be used when backoffLimitPerIndex is set.",
                ),
                (
                    "FailJob",
                    "This is an action which might be taken on a pod failure - mark the pod's job as Failed and terminate all running pods.",
                ),
                (
                    "Ignore",
                    "This is an action which might be taken on a pod failure - the counter towards .backoffLimit, represented by the job's .status.failed field, is not incremented and a replacement pod is created.",
                ),
            ],
        )],
    ),
    (
        "io.k8s.api.core.v1.AppArmorProfile",
        &[(
            "type",
            false,
            &[
                (
                    "Localhost",
                    "indicates that a profile pre-loaded on the node should be used.",
                ),
                (
                    "RuntimeDefault",
                    "indicates that the container runtime's default AppArmor profile should be used.",
                ),
                (
                    "Unconfined",
                    "indicates that no AppArmor profile should be enforced.",
                ),
            ],
        )],
    ),
    (
        "io.k8s.api.core.v1.AzureDiskVolumeSource",
        &[
            (
                "cachingMode",
                false,
                &[("None", ""), ("ReadOnly", ""), ("ReadWrite", "")],
            ),
            (
                "kind",
                false,
                &[("Dedicated", ""), ("Managed", ""), ("Shared", "")],
            ),
        ],
    ),
    (
        "io.k8s.api.core.v1.Container",
        &[
            (
                "terminationMessagePolicy",
                false,
                &[
                    (
                        "FallbackToLogsOnError",
                        "will read the most recent contents of the container logs for the container status message when the container exits with an error and the terminationMessagePath has no contents.",
                    ),
                    (
                        "File",
                        "is the default behavior and will set the container status message to the contents of the container's terminationMessagePath when the container exits.",
                    ),
                ],
            ),
            (
                "imagePullPolicy",
                false,
                &[
                    (
                        "Always",
                        "means that kubelet always attempts to pull the latest image. Container will fail If the pull fails.",
                    ),
                    (
                        "IfNotPresent",
                        "means that kubelet pulls if the image isn't present on disk. Container will fail if the image isn't present and the pull fails.",
                    ),
                    (
                        "Never",
                        "means that kubelet never pulls an image, but only uses a local image. Container will fail if the image isn't present",
                    ),
                ],
            ),
        ],
    ),
    (
        "io.k8s.api.core.v1.ContainerPort",
        &[(
            "protocol",
            false,
            &[
                ("SCTP", "is the SCTP protocol."),
                ("TCP", "is the TCP protocol."),
                ("UDP", "is the UDP protocol."),
            ],
        )],
    ),
    (
        "io.k8s.api.core.v1.ContainerStatus",
        &[("stopSignal", false, SIGNALS)],
    ),
    (
        "io.k8s.api.core.v1.EndpointPort",
        &[(
            "protocol",
            false,
            &[
                ("SCTP", "is the SCTP protocol."),
                ("TCP", "is the TCP protocol."),
                ("UDP", "is the UDP protocol."),
            ],
        )],
    ),
    (
        "io.k8s.api.core.v1.EphemeralContainer",
        &[
            (
                "terminationMessagePolicy",
                false,
                &[
                    (
                        "FallbackToLogsOnError",
                        "will read the most recent contents of the container logs for the container status message when the container exits with an error and the terminationMessagePath has no contents.",
                    ),
                    (
                        "File",
                        "is the default behavior and will set the container status message to the contents of the container's terminationMessagePath when the container exits.",
                    ),
                ],
            ),
            (
                "imagePullPolicy",
                false,
                &[
                    (
                        "Always",
                        "means that kubelet always attempts to pull the latest image. Container will fail If the pull fails.",
                    ),
                    (
                        "IfNotPresent",
                        "means that kubelet pulls if the image isn't present on disk. Container will fail if the image isn't present and the pull fails.",
                    ),
                    (
                        "Never",
                        "means that kubelet never pulls an image, but only uses a local image. Container will fail if the image isn't present",
                    ),
                ],
            ),
        ],
    ),
    (
        "io.k8s.api.core.v1.HTTPGetAction",
        &[(
            "scheme",
            false,
            &[
                ("HTTP", "means that the scheme used will be http://"),
                ("HTTPS", "means that the scheme used will be https://"),
            ],
        )],
    ),
    (
        "io.k8s.api.core.v1.HostPathVolumeSource",
        &[(
            "type",
            false,
            &[
                ("", "For backwards compatible, leave it empty if unset"),
                ("BlockDevice", "A block device must exist at the given path"),
                (
                    "CharDevice",
                    "A character device must exist at the given path",
                ),
                ("Directory", "A directory must exist at the given path"),
                (
                    "DirectoryOrCreate",
                    "If nothing exists at the given path, an empty directory will be created there as needed with file mode 0755, having the same group and ownership with Kubelet.",
                ),
                ("File", "A file must exist at the given path"),
                (
                    "FileOrCreate",
                    "If nothing exists at the given path, an empty file will be created there as needed with file mode 0644, having the same group and ownership with Kubelet.",
                ),
                ("Socket", "A UNIX socket must exist at the given path"),
            ],
        )],
    ),
    (
        "io.k8s.api.core.v1.ImageVolumeSource",
        &[(
            "pullPolicy",
            false,
            &[
                (
                    "Always",
                    "means that kubelet always attempts to pull the latest image. Container will fail If the pull fails.",
                ),
                (
                    "IfNotPresent",
                    "means that kubelet pulls if the image isn't present on disk. Container will fail if the image isn't present and the pull fails.",
                ),
                (
                    "Never",
                    "means that kubelet never pulls an image, but only uses a local image. Container will fail if the image isn't present",
                ),
            ],
        )],
    ),
    (
        "io.k8s.api.core.v1.Lifecycle",
        &[("stopSignal", false, SIGNALS)],
    ),
    (
        "io.k8s.api.core.v1.ModifyVolumeStatus",
        &[(
            "status",
            false,
            &[
                (
                    "InProgress",
                    "InProgress indicates that the volume is being modified",
                ),
                (
                    "Infeasible",
                    "Infeasible indicates that the request has been rejected as invalid by the CSI driver. To resolve the error, a valid VolumeAttributesClass needs to be specified",
                ),
                (
                    "Pending",
                    "Pending indicates that the PersistentVolumeClaim cannot be modified due to unmet requirements, such as the specified VolumeAttributesClass not existing",
                ),
            ],
        )],
    ),
    (
        "io.k8s.api.core.v1.NamespaceStatus",
        &[(
            "phase",
            false,
            &[
                (
                    "Active",
                    "means the namespace is available for use in the system",
                ),
                (
                    "Terminating",
                    "means the namespace is undergoing graceful termination",
                ),
            ],
        )],
    ),
    (
        "io.k8s.api.core.v1.NodeSelectorRequirement",
        &[(
            "operator",
            false,
            &[
                ("DoesNotExist", ""),
                ("Exists", ""),
                ("Gt", ""),
                ("In", ""),
                ("Lt", ""),
                ("NotIn", ""),
            ],
        )],
    ),
    (
        "io.k8s.api.core.v1.NodeStatus",
        &[(
            "phase",
            false,
            &[
                (
                    "Pending",
                    "means the node has been created/added by the system, but not configured.",
                ),
                (
                    "Running",
                    "means the node has been configured and has Kubernetes components running.",
                ),
                (
                    "Terminated",
                    "means the node has been removed from the cluster.",
                ),
            ],
        )],
    ),
    (
        "io.k8s.api.core.v1.PersistentVolumeClaimSpec",
        &[
            (
                "accessModes",
                true,
                &[
                    (
                        "ReadOnlyMany",
                        "can be mounted in read-only mode to many hosts",
                    ),
                    (
                        "ReadWriteMany",
                        "can be mounted in read/write mode to many hosts",
                    ),
                    (
                        "ReadWriteOnce",
                        "can be mounted in read/write mode to exactly 1 host",
                    ),
                    (
                        "ReadWriteOncePod",
                        "can be mounted in read/write mode to exactly 1 pod cannot be used in combination with other access modes",
                    ),
                ],
            ),
            (
                "volumeMode",
                false,
                &[
                    (
                        "Block",
                        "means the volume will not be formatted with a filesystem and will remain a raw block device.",
                    ),
                    (
                        "Filesystem",
                        "means the volume will be or is formatted with a filesystem.",
                    ),
                ],
            ),
        ],
    ),
    (
        "io.k8s.api.core.v1.PersistentVolumeClaimStatus",
        &[
            (
                "phase",
                false,
                &[
                    ("Bound", "used for PersistentVolumeClaims that are bound"),
                    (
                        "Lost",
                        "used for PersistentVolumeClaims that lost their underlying PersistentVolume. The claim was bound to a PersistentVolume and this volume does not exist any longer and all data on it was lost.",
                    ),
                    (
                        "Pending",
                        "used for PersistentVolumeClaims that are not yet bound",
                    ),
                ],
            ),
            (
                "accessModes",
                true,
                &[
                    (
                        "ReadOnlyMany",
                        "can be mounted in read-only mode to many hosts",
                    ),
                    (
                        "ReadWriteMany",
                        "can be mounted in read/write mode to many hosts",
                    ),
                    (
                        "ReadWriteOnce",
                        "can be mounted in read/write mode to exactly 1 host",
                    ),
                    (
                        "ReadWriteOncePod",
                        "can be mounted in read/write mode to exactly 1 pod cannot be used in combination with other access modes",
                    ),
                ],
            ),
        ],
    ),
    (
        "io.k8s.api.core.v1.PersistentVolumeSpec",
        &[
            (
                "accessModes",
                true,
                &[
                    (
                        "ReadOnlyMany",
                        "can be mounted in read-only mode to many hosts",
                    ),
                    (
                        "ReadWriteMany",
                        "can be mounted in read/write mode to many hosts",
                    ),
                    (
                        "ReadWriteOnce",
                        "can be mounted in read/write mode to exactly 1 host",
                    ),
                    (
                        "ReadWriteOncePod",
                        "can be mounted in read/write mode to exactly 1 pod cannot be used in combination with other access modes",
                    ),
                ],
            ),
            (
                "persistentVolumeReclaimPolicy",
                false,
                &[
                    (
                        "Delete",
                        "means the volume will be deleted from Kubernetes on release from its claim. The volume plugin must support Deletion.",
                    ),
                    (
                        "Recycle",
                        "means the volume will be recycled back into the pool of unbound persistent volumes on release from its claim. The volume plugin must support Recycling.",
                    ),
                    (
                        "Retain",
                        "means the volume will be left in its current phase (Released) for manual reclamation by the administrator. The default policy is Retain.",
                    ),
                ],
            ),
            (
                "volumeMode",
                false,
                &[
                    (
                        "Block",
                        "means the volume will not be formatted with a filesystem and will remain a raw block device.",
                    ),
                    (
                        "Filesystem",
                        "means the volume will be or is formatted with a filesystem.",
                    ),
                ],
            ),
        ],
    ),
    (
        "io.k8s.api.core.v1.PersistentVolumeStatus",
        &[(
            "phase",
            false,
            &[
                (
                    "Available",
                    "used for PersistentVolumes that are not yet bound Available volumes are held by the binder and matched to PersistentVolumeClaims",
                ),
                ("Bound", "used for PersistentVolumes that are bound"),
                (
                    "Failed",
                    "used for PersistentVolumes that failed to be correctly recycled or deleted after being released from a claim",
                ),
                (
                    "Pending",
                    "used for PersistentVolumes that are not available",
                ),
                (
                    "Released",
                    "used for PersistentVolumes where the bound PersistentVolumeClaim was deleted released volumes must be recycled before becoming available again this phase is used by the persistent volume claim binder to signal to another process to reclaim the resource",
                ),
            ],
        )],
    ),
    (
        "io.k8s.api.core.v1.PodSecurityContext",
        &[
            (
                "supplementalGroupsPolicy",
                false,
                &[
                    (
                        "Merge",
                        "means that the container's provided SupplementalGroups and FsGroup (specified in SecurityContext) will be merged with the primary user's groups as defined in the container image (in /etc/group).",
                    ),
                    (
                        "Strict",
                        "means that the container's provided SupplementalGroups and FsGroup (specified in SecurityContext) will be used instead of any groups defined in the container image.",
                    ),
                ],
            ),
            (
                "fsGroupChangePolicy",
                false,
                &[
                    (
                        "Always",
                        "indicates that volume's ownership and permissions should always be changed whenever volume is mounted inside a Pod. This the default behavior.",
                    ),
                    (
                        "OnRootMismatch",
                        "indicates that volume's ownership and permissions will be changed only when permission and ownership of root directory does not match with expected permissions on the volume. This can help shorten the time it takes to change ownership and permissions of a volume.",
                    ),
                ],
            ),
        ],
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        &[
            (
                "restartPolicy",
                false,
                &[("Always", ""), ("Never", ""), ("OnFailure", "")],
            ),
            (
                "dnsPolicy",
                false,
                &[
                    (
                        "ClusterFirst",
                        "indicates that the pod should use cluster DNS first unless hostNetwork is true, if it is available, then fall back on the default (as determined by kubelet) DNS settings.",
                    ),
                    (
                        "ClusterFirstWithHostNet",
                        "indicates that the pod should use cluster DNS first, if it is available, then fall back on the default (as determined by kubelet) DNS settings.",
                    ),
                    (
                        "Default",
                        "indicates that the pod should use the default (as determined by kubelet) DNS settings.",
                    ),
                    (
                        "None",
                        "indicates that the pod should use empty DNS settings. DNS parameters such as nameservers and search paths should be defined via DNSConfig.",
                    ),
                ],
            ),
            (
                "preemptionPolicy",
                false,
                &[
                    (
                        "Never",
                        "means that pod never preempts other pods with lower priority.",
                    ),
                    (
                        "PreemptLowerPriority",
                        "means that pod can preempt other pods with lower priority.",
                    ),
                ],
            ),
        ],
    ),
    (
        "io.k8s.api.core.v1.PodStatus",
        &[
            (
                "phase",
                false,
                &[
                    (
                        "Failed",
                        "means that all containers in the pod have terminated, and at least one container has terminated in a failure (exited with a non-zero exit code or was stopped by the system).",
                    ),
                    (
                        "Pending",
                        "means the pod has been accepted by the system, but one or more of the containers has not been started. This includes time before being bound to a node, as well as time spent pulling images onto the host.",
                    ),
                    (
                        "Running",
                        "means the pod has been bound to a node and all of the containers have been started. At least one container is still running or is in the process of being restarted.",
                    ),
                    (
                        "Succeeded",
                        "means that all containers in the pod have voluntarily terminated with a container exit code of 0, and the system is not going to restart any of these containers.",
                    ),
                    (
                        "Unknown",
                        "means that for some reason the state of the pod could not be obtained, typically due to an error in communicating with the host of the pod. Deprecated: It isn't being set since 2015 (74da3b14b0c0f658b3bb8d2def5094686d0e9095)",
                    ),
                ],
            ),
            (
                "qosClass",
                false,
                &[
                    ("BestEffort", "is the BestEffort qos class."),
                    ("Burstable", "is the Burstable qos class."),
                    ("Guaranteed", "is the Guaranteed qos class."),
                ],
            ),
        ],
    ),
    (
        "io.k8s.api.core.v1.PortStatus",
        &[(
            "protocol",
            false,
            &[
                ("SCTP", "is the SCTP protocol."),
                ("TCP", "is the TCP protocol."),
                ("UDP", "is the UDP protocol."),
            ],
        )],
    ),
    (
        "io.k8s.api.core.v1.ResourceQuotaSpec",
        &[(
            "scopes",
            true,
            &[
                (
                    "BestEffort",
                    "Match all pod objects that have best effort quality of service",
                ),
                (
                    "CrossNamespacePodAffinity",
                    "Match all pod objects that have cross-namespace pod (anti)affinity mentioned.",
                ),
                (
                    "NotBestEffort",
                    "Match all pod objects that do not have best effort quality of service",
                ),
                (
                    "NotTerminating",
                    "Match all pod objects where spec.activeDeadlineSeconds is nil",
                ),
                (
                    "PriorityClass",
                    "Match all pod objects that have priority class mentioned",
                ),
                (
                    "Terminating",
                    "Match all pod objects where spec.activeDeadlineSeconds >=0",
                ),
                (
                    "VolumeAttributesClass",
                    "Match all pvc objects that have volume attributes class mentioned.",
                ),
            ],
        )],
    ),
    (
        "io.k8s.api.core.v1.ScopedResourceSelectorRequirement",
        &[
            (
                "scopeName",
                false,
                &[
                    (
                        "BestEffort",
                        "Match all pod objects that have best effort quality of service",
                    ),
                    (
                        "CrossNamespacePodAffinity",
                        "Match all pod objects that have cross-namespace pod (anti)affinity mentioned.",
                    ),
                    (
                        "NotBestEffort",
                        "Match all pod objects that do not have best effort quality of service",
                    ),
                    (
                        "NotTerminating",
                        "Match all pod objects where spec.activeDeadlineSeconds is nil",
                    ),
                    (
                        "PriorityClass",
                        "Match all pod objects that have priority class mentioned",
                    ),
                    (
                        "Terminating",
                        "Match all pod objects where spec.activeDeadlineSeconds >=0",
                    ),
                    (
                        "VolumeAttributesClass",
                        "Match all pvc objects that have volume attributes class mentioned.",
                    ),
                ],
            ),
            (
                "operator",
                false,
                &[
                    ("DoesNotExist", ""),
                    ("Exists", ""),
                    ("In", ""),
                    ("NotIn", ""),
                ],
            ),
        ],
    ),
    (
        "io.k8s.api.core.v1.SeccompProfile",
        &[(
            "type",
            false,
            &[
                (
                    "Localhost",
                    "indicates a profile defined in a file on the node should be used. The file's location relative to <kubelet-root-dir>/seccomp.",
                ),
                (
                    "RuntimeDefault",
                    "represents the default container runtime seccomp profile.",
                ),
                (
                    "Unconfined",
                    "indicates no seccomp profile is applied (A.K.A. unconfined).",
                ),
            ],
        )],
    ),
    (
        "io.k8s.api.core.v1.SecurityContext",
        &[(
            "procMount",
            false,
            &[
                (
                    "Default",
                    "uses the container runtime defaults for readonly and masked paths for /proc.  Most container runtimes mask certain paths in /proc to avoid accidental security exposure of special devices or information.",
                ),
                (
                    "Unmasked",
                    "bypasses the default masking behavior of the container runtime and ensures the newly created /proc the container stays in tact with no modifications.",
                ),
            ],
        )],
    ),
    (
        "io.k8s.api.core.v1.ServicePort",
        &[(
            "protocol",
            false,
            &[
                ("SCTP", "is the SCTP protocol."),
                ("TCP", "is the TCP protocol."),
                ("UDP", "is the UDP protocol."),
            ],
        )],
    ),
    (
        "io.k8s.api.core.v1.ServiceSpec",
        &[
            (
                "type",
                false,
                &[
                    (
                        "ClusterIP",
                        "means a service will only be accessible inside the cluster, via the cluster IP.",
                    ),
                    (
                        "ExternalName",
                        "means a service consists of only a reference to an external name that kubedns or equivalent will return as a CNAME record, with no exposing or proxying of any pods involved.",
                    ),
                    (
                        "LoadBalancer",
                        "means a service will be exposed via an external load balancer (if the cloud provider supports it), in addition to 'NodePort' type.",
                    ),
                    (
                        "NodePort",
                        "means a service will be exposed on one port of every node, in addition to 'ClusterIP' type.",
                    ),
                ],
            ),
            (
                "sessionAffinity",
                false,
                &[
                    ("ClientIP", "is the Client IP based."),
                    ("None", "- no session affinity."),
                ],
            ),
            (
                "externalTrafficPolicy",
                false,
                &[
                    ("Cluster", "routes traffic to all endpoints."),
                    (
                        "Local",
                        "preserves the source IP of the traffic by routing only to endpoints on the same node as the traffic was received on (dropping the traffic if there are no local endpoints).",
                    ),
                ],
            ),
            (
                "ipFamilies",
                true,
                &[
                    ("", "indicates that this IP is unknown protocol"),
                    ("IPv4", "indicates that this IP is IPv4 protocol"),
                    ("IPv6", "indicates that this IP is IPv6 protocol"),
                ],
            ),
            (
                "ipFamilyPolicy",
                false,
                &[
                    (
                        "PreferDualStack",
                        "indicates that this service prefers dual-stack when the cluster is configured for dual-stack. If the cluster is not configured for dual-stack the service will be assigned a single IPFamily. If the IPFamily is not set in service.spec.ipFamilies then the service will be assigned the default IPFamily configured on the cluster",
                    ),
                    (
                        "RequireDualStack",
                        "indicates that this service requires dual-stack. Using IPFamilyPolicyRequireDualStack on a single stack cluster will result in validation errors. The IPFamilies (and their order) assigned  to this service is based on service.spec.ipFamilies. If service.spec.ipFamilies was not provided then it will be assigned according to how they are configured on the cluster. If service.spec.ipFamilies has only one entry then the alternative IPFamily will be added by apiserver",
                    ),
                    (
                        "SingleStack",
                        "indicates that this service is required to have a single IPFamily. The IPFamily assigned is based on the default IPFamily used by the cluster or as identified by service.spec.ipFamilies field",
                    ),
                ],
            ),
            (
                "internalTrafficPolicy",
                false,
                &[
                    ("Cluster", "routes traffic to all endpoints."),
                    (
                        "Local",
                        "routes traffic only to endpoints on the same node as the client pod (dropping the traffic if there are no local endpoints).",
                    ),
                ],
            ),
        ],
    ),
    (
        "io.k8s.api.core.v1.Taint",
        &[(
            "effect",
            false,
            &[
                (
                    "NoExecute",
                    "Evict any already-running pods that do not tolerate the taint. Currently enforced by NodeController.",
                ),
                (
                    "NoSchedule",
                    "Do not allow new pods to schedule onto the node unless they tolerate the taint, but allow all pods submitted to Kubelet without going through the scheduler to start, and allow all already-running pods to continue running. Enforced by the scheduler.",
                ),
                (
                    "PreferNoSchedule",
                    "Like TaintEffectNoSchedule, but the scheduler tries not to schedule new pods onto the node, rather than prohibiting new pods from scheduling onto the node entirely. Enforced by the scheduler.",
                ),
            ],
        )],
    ),
    (
        "io.k8s.api.core.v1.Toleration",
        &[
            ("operator", false, &[("Equal", ""), ("Exists", "")]),
            (
                "effect",
                false,
                &[
                    (
                        "NoExecute",
                        "Evict any already-running pods that do not tolerate the taint. Currently enforced by NodeController.",
                    ),
                    (
                        "NoSchedule",
                        "Do not allow new pods to schedule onto the node unless they tolerate the taint, but allow all pods submitted to Kubelet without going through the scheduler to start, and allow all already-running pods to continue running. Enforced by the scheduler.",
                    ),
                    (
                        "PreferNoSchedule",
                        "Like TaintEffectNoSchedule, but the scheduler tries not to schedule new pods onto the node, rather than prohibiting new pods from scheduling onto the node entirely. Enforced by the scheduler.",
                    ),
                ],
            ),
        ],
    ),
    (
        "io.k8s.api.core.v1.TopologySpreadConstraint",
        &[
            (
                "whenUnsatisfiable",
                false,
                &[
                    (
                        "DoNotSchedule",
                        "instructs the scheduler not to schedule the pod when constraints are not satisfied.",
                    ),
                    (
                        "ScheduleAnyway",
                        "instructs the scheduler to schedule the pod even if constraints are not satisfied.",
                    ),
                ],
            ),
            (
                "nodeAffinityPolicy",
                false,
                &[
                    (
                        "Honor",
                        "means use this scheduling directive when calculating pod topology spread skew.",
                    ),
                    (
                        "Ignore",
                        "means ignore this scheduling directive when calculating pod topology spread skew.",
                    ),
                ],
            ),
            (
                "nodeTaintsPolicy",
                false,
                &[
                    (
                        "Honor",
                        "means use this scheduling directive when calculating pod topology spread skew.",
                    ),
                    (
                        "Ignore",
                        "means ignore this scheduling directive when calculating pod topology spread skew.",
                    ),
                ],
            ),
        ],
    ),
    (
        "io.k8s.api.core.v1.VolumeMount",
        &[(
            "mountPropagation",
            false,
            &[
                (
                    "Bidirectional",
                    "means that the volume in a container will receive new mounts from the host or other containers, and its own mounts will be propagated from the container to the host or other containers. Note that this mode is recursively applied to all mounts in the volume (\"rshared\" in Linux terminology).",
                ),
                (
                    "HostToContainer",
                    "means that the volume in a container will receive new mounts from the host or other containers, but filesystems mounted inside the container won't be propagated to the host or other containers. Note that this mode is recursively applied to all mounts in the volume (\"rslave\" in Linux terminology).",
                ),
                (
                    "None",
                    "means that the volume in a container will not receive new mounts from the host or other containers, and filesystems mounted inside the container won't be propagated to the host or other containers. Note that this mode corresponds to \"private\" in Linux terminology.",
                ),
            ],
        )],
    ),
    (
        "io.k8s.api.discovery.v1.EndpointPort",
        &[(
            "protocol",
            false,
            &[
                ("SCTP", "is the SCTP protocol."),
                ("TCP", "is the TCP protocol."),
                ("UDP", "is the UDP protocol."),
            ],
        )],
    ),
    (
        "io.k8s.api.discovery.v1.EndpointSlice",
        &[(
            "addressType",
            false,
            &[
                ("FQDN", "represents a FQDN."),
                ("IPv4", "represents an IPv4 Address."),
                ("IPv6", "represents an IPv6 Address."),
            ],
        )],
    ),
    (
        "io.k8s.api.networking.v1.HTTPIngressPath",
        &[(
            "pathType",
            false,
            &[
                (
                    "Exact",
                    "matches the URL path exactly and with case sensitivity.",
                ),
                (
                    "ImplementationSpecific",
                    "matching is up to the IngressClass. Implementations can treat this as a separate PathType or treat it identically to Prefix or Exact path types.",
                ),
                (
                    "Prefix",
                    "matches based on a URL path prefix split by '/'. Matching is case sensitive and done on a path element by element basis. A path element refers to the list of labels in the path split by the '/' separator. A request is a match for path p if every p is an element-wise prefix of p of the request path. Note that if the last element of the path is a substring of the last element in request path, it is not a match (e.g. /foo/bar matches /foo/bar/baz, but does not match /foo/barbaz). If multiple matching paths exist in an Ingress spec, the longest matching path is given priority. Examples: - /foo/bar does not match requests to /foo/barbaz - /foo/bar matches request to /foo/bar and /foo/bar/baz - /foo and /foo/ both match requests to /foo and /foo/. If both paths are present in an Ingress spec, the longest matching path (/foo/) is given priority.",
                ),
            ],
        )],
    ),
    (
        "io.k8s.api.networking.v1.IngressPortStatus",
        &[(
            "protocol",
            false,
            &[
                ("SCTP", "is the SCTP protocol."),
                ("TCP", "is the TCP protocol."),
                ("UDP", "is the UDP protocol."),
            ],
        )],
    ),
    (
        "io.k8s.api.networking.v1.NetworkPolicyPort",
        &[(
            "protocol",
            false,
            &[
                ("SCTP", "is the SCTP protocol."),
                ("TCP", "is the TCP protocol."),
                ("UDP", "is the UDP protocol."),
            ],
        )],
    ),
    (
        "io.k8s.api.networking.v1.NetworkPolicySpec",
        &[(
            "policyTypes",
            true,
            &[
                (
                    "Egress",
                    "is a NetworkPolicy that affects egress traffic on selected pods",
                ),
                (
                    "Ingress",
                    "is a NetworkPolicy that affects ingress traffic on selected pods",
                ),
            ],
        )],
    ),
    (
        "io.k8s.api.policy.v1.PodDisruptionBudgetSpec",
        &[(
            "unhealthyPodEvictionPolicy",
            false,
            &[
                (
                    "AlwaysAllow",
                    "policy means that all running pods (status.phase=\"Running\"), but not yet healthy are considered disrupted and can be evicted regardless of whether the criteria in a PDB is met. This means perspective running pods of a disrupted application might not get a chance to become healthy. Healthy pods will be subject to the PDB for eviction.",
                ),
                (
                    "IfHealthyBudget",
                    "policy means that running pods (status.phase=\"Running\"), but not yet healthy can be evicted only if the guarded application is not disrupted (status.currentHealthy is at least equal to status.desiredHealthy). Healthy pods will be subject to the PDB for eviction.",
                ),
            ],
        )],
    ),
    (
        "io.k8s.api.storage.v1.StorageClass",
        &[
            (
                "reclaimPolicy",
                false,
                &[
                    (
                        "Delete",
                        "means the volume will be deleted from Kubernetes on release from its claim. The volume plugin must support Deletion.",
                    ),
                    (
                        "Recycle",
                        "means the volume will be recycled back into the pool of unbound persistent volumes on release from its claim. The volume plugin must support Recycling.",
                    ),
                    (
                        "Retain",
                        "means the volume will be left in its current phase (Released) for manual reclamation by the administrator. The default policy is Retain.",
                    ),
                ],
            ),
            (
                "volumeBindingMode",
                false,
                &[
                    (
                        "Immediate",
                        "indicates that PersistentVolumeClaims should be immediately provisioned and bound.  This is the default mode.",
                    ),
                    (
                        "WaitForFirstConsumer",
                        "indicates that PersistentVolumeClaims should not be provisioned and bound until the first Pod is created that references the PeristentVolumeClaim.  The volume provisioning and binding will occur during Pod scheduing.",
                    ),
                ],
            ),
        ],
    ),
];
