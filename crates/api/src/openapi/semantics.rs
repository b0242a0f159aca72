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
    Field { name, patch_strategy, patch_merge_key, list_type, list_map_keys, map_type }
}

/// Per schema (upstream dotted name), the fields with list/map semantics.
pub static FIELD_SEMANTICS: &[(&str, &[Field])] = &[
    ("io.k8s.api.apps.v1.DaemonSetStatus", &[
        f("conditions", "merge", "type", "map", &["type"], ""),
    ]),
    ("io.k8s.api.apps.v1.DeploymentSpec", &[
        f("strategy", "retainKeys", "", "", &[], ""),
    ]),
    ("io.k8s.api.apps.v1.DeploymentStatus", &[
        f("conditions", "merge", "type", "map", &["type"], ""),
    ]),
    ("io.k8s.api.apps.v1.ReplicaSetStatus", &[
        f("conditions", "merge", "type", "map", &["type"], ""),
    ]),
    ("io.k8s.api.apps.v1.StatefulSetSpec", &[
        f("volumeClaimTemplates", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.apps.v1.StatefulSetStatus", &[
        f("conditions", "merge", "type", "map", &["type"], ""),
    ]),
    ("io.k8s.api.autoscaling.v2.HPAScalingRules", &[
        f("policies", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerSpec", &[
        f("metrics", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerStatus", &[
        f("currentMetrics", "", "", "atomic", &[], ""),
        f("conditions", "merge", "type", "map", &["type"], ""),
    ]),
    ("io.k8s.api.batch.v1.CronJobStatus", &[
        f("active", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.batch.v1.JobStatus", &[
        f("conditions", "merge", "type", "atomic", &[], ""),
    ]),
    ("io.k8s.api.batch.v1.PodFailurePolicy", &[
        f("rules", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.batch.v1.PodFailurePolicyOnExitCodesRequirement", &[
        f("values", "", "", "set", &[], ""),
    ]),
    ("io.k8s.api.batch.v1.PodFailurePolicyRule", &[
        f("onPodConditions", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.batch.v1.SuccessPolicy", &[
        f("rules", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.batch.v1.UncountedTerminatedPods", &[
        f("succeeded", "", "", "set", &[], ""),
        f("failed", "", "", "set", &[], ""),
    ]),
    ("io.k8s.api.core.v1.AvoidPods", &[
        f("preferAvoidPods", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.core.v1.Capabilities", &[
        f("add", "", "", "atomic", &[], ""),
        f("drop", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.core.v1.CephFSPersistentVolumeSource", &[
        f("monitors", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.core.v1.CephFSVolumeSource", &[
        f("monitors", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.core.v1.ComponentStatus", &[
        f("conditions", "merge", "type", "map", &["type"], ""),
    ]),
    ("io.k8s.api.core.v1.ConfigMapProjection", &[
        f("items", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.core.v1.ConfigMapVolumeSource", &[
        f("items", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.core.v1.Container", &[
        f("command", "", "", "atomic", &[], ""),
        f("args", "", "", "atomic", &[], ""),
        f("ports", "merge", "containerPort", "map", &["containerPort", "protocol"], ""),
        f("envFrom", "", "", "atomic", &[], ""),
        f("env", "merge", "name", "map", &["name"], ""),
        f("resizePolicy", "", "", "atomic", &[], ""),
        f("volumeMounts", "merge", "mountPath", "map", &["mountPath"], ""),
        f("volumeDevices", "merge", "devicePath", "map", &["devicePath"], ""),
    ]),
    ("io.k8s.api.core.v1.ContainerImage", &[
        f("names", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.core.v1.ContainerStatus", &[
        f("volumeMounts", "merge", "mountPath", "map", &["mountPath"], ""),
        f("allocatedResourcesStatus", "merge", "name", "map", &["name"], ""),
    ]),
    ("io.k8s.api.core.v1.DownwardAPIProjection", &[
        f("items", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.core.v1.DownwardAPIVolumeSource", &[
        f("items", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.core.v1.EndpointSubset", &[
        f("addresses", "", "", "atomic", &[], ""),
        f("notReadyAddresses", "", "", "atomic", &[], ""),
        f("ports", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.core.v1.Endpoints", &[
        f("subsets", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.core.v1.EphemeralContainer", &[
        f("command", "", "", "atomic", &[], ""),
        f("args", "", "", "atomic", &[], ""),
        f("ports", "merge", "containerPort", "map", &["containerPort", "protocol"], ""),
        f("envFrom", "", "", "atomic", &[], ""),
        f("env", "merge", "name", "map", &["name"], ""),
        f("resizePolicy", "", "", "atomic", &[], ""),
        f("volumeMounts", "merge", "mountPath", "map", &["mountPath"], ""),
        f("volumeDevices", "merge", "devicePath", "map", &["devicePath"], ""),
    ]),
    ("io.k8s.api.core.v1.ExecAction", &[
        f("command", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.core.v1.FCVolumeSource", &[
        f("targetWWNs", "", "", "atomic", &[], ""),
        f("wwids", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.core.v1.HTTPGetAction", &[
        f("httpHeaders", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.core.v1.HostAlias", &[
        f("hostnames", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.core.v1.ISCSIPersistentVolumeSource", &[
        f("portals", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.core.v1.ISCSIVolumeSource", &[
        f("portals", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.core.v1.LimitRangeSpec", &[
        f("limits", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.core.v1.LinuxContainerUser", &[
        f("supplementalGroups", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.core.v1.LoadBalancerIngress", &[
        f("ports", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.core.v1.LoadBalancerStatus", &[
        f("ingress", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.core.v1.NamespaceSpec", &[
        f("finalizers", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.core.v1.NamespaceStatus", &[
        f("conditions", "merge", "type", "map", &["type"], ""),
    ]),
    ("io.k8s.api.core.v1.NodeAffinity", &[
        f("preferredDuringSchedulingIgnoredDuringExecution", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.core.v1.NodeSelector", &[
        f("nodeSelectorTerms", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.core.v1.NodeSelectorRequirement", &[
        f("values", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.core.v1.NodeSelectorTerm", &[
        f("matchExpressions", "", "", "atomic", &[], ""),
        f("matchFields", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.core.v1.NodeSpec", &[
        f("podCIDRs", "merge", "", "set", &[], ""),
        f("taints", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.core.v1.NodeStatus", &[
        f("conditions", "merge", "type", "map", &["type"], ""),
        f("addresses", "merge", "type", "map", &["type"], ""),
        f("images", "", "", "atomic", &[], ""),
        f("volumesInUse", "", "", "atomic", &[], ""),
        f("volumesAttached", "", "", "atomic", &[], ""),
        f("runtimeHandlers", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.core.v1.PersistentVolumeClaimSpec", &[
        f("accessModes", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.core.v1.PersistentVolumeClaimStatus", &[
        f("accessModes", "", "", "atomic", &[], ""),
        f("conditions", "merge", "type", "map", &["type"], ""),
        f("allocatedResourceStatuses", "", "", "", &[], "granular"),
    ]),
    ("io.k8s.api.core.v1.PersistentVolumeSpec", &[
        f("accessModes", "", "", "atomic", &[], ""),
        f("mountOptions", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.core.v1.PodAffinity", &[
        f("requiredDuringSchedulingIgnoredDuringExecution", "", "", "atomic", &[], ""),
        f("preferredDuringSchedulingIgnoredDuringExecution", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.core.v1.PodAffinityTerm", &[
        f("namespaces", "", "", "atomic", &[], ""),
        f("matchLabelKeys", "", "", "atomic", &[], ""),
        f("mismatchLabelKeys", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.core.v1.PodAntiAffinity", &[
        f("requiredDuringSchedulingIgnoredDuringExecution", "", "", "atomic", &[], ""),
        f("preferredDuringSchedulingIgnoredDuringExecution", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.core.v1.PodDNSConfig", &[
        f("nameservers", "", "", "atomic", &[], ""),
        f("searches", "", "", "atomic", &[], ""),
        f("options", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.core.v1.PodExecOptions", &[
        f("command", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.core.v1.PodPortForwardOptions", &[
        f("ports", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.core.v1.PodSecurityContext", &[
        f("supplementalGroups", "", "", "atomic", &[], ""),
        f("sysctls", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.core.v1.PodSpec", &[
        f("volumes", "merge,retainKeys", "name", "map", &["name"], ""),
        f("initContainers", "merge", "name", "map", &["name"], ""),
        f("containers", "merge", "name", "map", &["name"], ""),
        f("ephemeralContainers", "merge", "name", "map", &["name"], ""),
        f("nodeSelector", "", "", "", &[], "atomic"),
        f("imagePullSecrets", "merge", "name", "map", &["name"], ""),
        f("tolerations", "", "", "atomic", &[], ""),
        f("hostAliases", "merge", "ip", "map", &["ip"], ""),
        f("readinessGates", "", "", "atomic", &[], ""),
        f("topologySpreadConstraints", "merge", "topologyKey", "map", &["topologyKey", "whenUnsatisfiable"], ""),
        f("schedulingGates", "merge", "name", "map", &["name"], ""),
        f("resourceClaims", "merge,retainKeys", "name", "map", &["name"], ""),
    ]),
    ("io.k8s.api.core.v1.PodStatus", &[
        f("conditions", "merge", "type", "map", &["type"], ""),
        f("hostIPs", "merge", "ip", "atomic", &[], ""),
        f("podIPs", "merge", "ip", "map", &["ip"], ""),
        f("initContainerStatuses", "", "", "atomic", &[], ""),
        f("containerStatuses", "", "", "atomic", &[], ""),
        f("ephemeralContainerStatuses", "", "", "atomic", &[], ""),
        f("resourceClaimStatuses", "merge,retainKeys", "name", "map", &["name"], ""),
    ]),
    ("io.k8s.api.core.v1.ProjectedVolumeSource", &[
        f("sources", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.core.v1.RBDPersistentVolumeSource", &[
        f("monitors", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.core.v1.RBDVolumeSource", &[
        f("monitors", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.core.v1.ReplicationControllerSpec", &[
        f("selector", "", "", "", &[], "atomic"),
    ]),
    ("io.k8s.api.core.v1.ReplicationControllerStatus", &[
        f("conditions", "merge", "type", "map", &["type"], ""),
    ]),
    ("io.k8s.api.core.v1.ResourceQuotaSpec", &[
        f("scopes", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.core.v1.ResourceRequirements", &[
        f("claims", "", "", "map", &["name"], ""),
    ]),
    ("io.k8s.api.core.v1.ResourceStatus", &[
        f("resources", "", "", "map", &["resourceID"], ""),
    ]),
    ("io.k8s.api.core.v1.ScopeSelector", &[
        f("matchExpressions", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.core.v1.ScopedResourceSelectorRequirement", &[
        f("values", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.core.v1.SecretProjection", &[
        f("items", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.core.v1.SecretVolumeSource", &[
        f("items", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.core.v1.ServiceAccount", &[
        f("secrets", "merge", "name", "map", &["name"], ""),
        f("imagePullSecrets", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.core.v1.ServiceSpec", &[
        f("ports", "merge", "port", "map", &["port", "protocol"], ""),
        f("selector", "", "", "", &[], "atomic"),
        f("clusterIPs", "", "", "atomic", &[], ""),
        f("externalIPs", "", "", "atomic", &[], ""),
        f("loadBalancerSourceRanges", "", "", "atomic", &[], ""),
        f("ipFamilies", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.core.v1.ServiceStatus", &[
        f("conditions", "merge", "type", "map", &["type"], ""),
    ]),
    ("io.k8s.api.core.v1.TopologySelectorLabelRequirement", &[
        f("values", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.core.v1.TopologySelectorTerm", &[
        f("matchLabelExpressions", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.core.v1.TopologySpreadConstraint", &[
        f("matchLabelKeys", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.discovery.v1.Endpoint", &[
        f("addresses", "", "", "set", &[], ""),
    ]),
    ("io.k8s.api.discovery.v1.EndpointHints", &[
        f("forZones", "", "", "atomic", &[], ""),
        f("forNodes", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.discovery.v1.EndpointSlice", &[
        f("endpoints", "", "", "atomic", &[], ""),
        f("ports", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.networking.v1.HTTPIngressRuleValue", &[
        f("paths", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.networking.v1.IPBlock", &[
        f("except", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.networking.v1.IngressLoadBalancerIngress", &[
        f("ports", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.networking.v1.IngressLoadBalancerStatus", &[
        f("ingress", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.networking.v1.IngressSpec", &[
        f("tls", "", "", "atomic", &[], ""),
        f("rules", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.networking.v1.IngressTLS", &[
        f("hosts", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.networking.v1.NetworkPolicyEgressRule", &[
        f("ports", "", "", "atomic", &[], ""),
        f("to", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.networking.v1.NetworkPolicyIngressRule", &[
        f("ports", "", "", "atomic", &[], ""),
        f("from", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.networking.v1.NetworkPolicySpec", &[
        f("ingress", "", "", "atomic", &[], ""),
        f("egress", "", "", "atomic", &[], ""),
        f("policyTypes", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.networking.v1.ServiceCIDRSpec", &[
        f("cidrs", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.networking.v1.ServiceCIDRStatus", &[
        f("conditions", "merge", "type", "map", &["type"], ""),
    ]),
    ("io.k8s.api.policy.v1.PodDisruptionBudgetSpec", &[
        f("selector", "replace", "", "", &[], ""),
    ]),
    ("io.k8s.api.policy.v1.PodDisruptionBudgetStatus", &[
        f("conditions", "merge", "type", "map", &["type"], ""),
    ]),
    ("io.k8s.api.rbac.v1.AggregationRule", &[
        f("clusterRoleSelectors", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.rbac.v1.ClusterRole", &[
        f("rules", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.rbac.v1.ClusterRoleBinding", &[
        f("subjects", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.rbac.v1.PolicyRule", &[
        f("verbs", "", "", "atomic", &[], ""),
        f("apiGroups", "", "", "atomic", &[], ""),
        f("resources", "", "", "atomic", &[], ""),
        f("resourceNames", "", "", "atomic", &[], ""),
        f("nonResourceURLs", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.rbac.v1.Role", &[
        f("rules", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.rbac.v1.RoleBinding", &[
        f("subjects", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.storage.v1.CSIDriverSpec", &[
        f("volumeLifecycleModes", "", "", "set", &[], ""),
        f("tokenRequests", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.storage.v1.CSINodeDriver", &[
        f("topologyKeys", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.api.storage.v1.CSINodeSpec", &[
        f("drivers", "merge", "name", "map", &["name"], ""),
    ]),
    ("io.k8s.api.storage.v1.StorageClass", &[
        f("mountOptions", "", "", "atomic", &[], ""),
        f("allowedTopologies", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.apimachinery.pkg.apis.meta.v1.APIGroup", &[
        f("versions", "", "", "atomic", &[], ""),
        f("serverAddressByClientCIDRs", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.apimachinery.pkg.apis.meta.v1.APIGroupList", &[
        f("groups", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.apimachinery.pkg.apis.meta.v1.APIResource", &[
        f("shortNames", "", "", "atomic", &[], ""),
        f("categories", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.apimachinery.pkg.apis.meta.v1.APIResourceList", &[
        f("resources", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.apimachinery.pkg.apis.meta.v1.APIVersions", &[
        f("versions", "", "", "atomic", &[], ""),
        f("serverAddressByClientCIDRs", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.apimachinery.pkg.apis.meta.v1.ApplyOptions", &[
        f("dryRun", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.apimachinery.pkg.apis.meta.v1.CreateOptions", &[
        f("dryRun", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions", &[
        f("dryRun", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.apimachinery.pkg.apis.meta.v1.FieldSelectorRequirement", &[
        f("values", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector", &[
        f("matchExpressions", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelectorRequirement", &[
        f("values", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", &[
        f("ownerReferences", "merge", "uid", "map", &["uid"], ""),
        f("finalizers", "merge", "", "set", &[], ""),
        f("managedFields", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.apimachinery.pkg.apis.meta.v1.PatchOptions", &[
        f("dryRun", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.apimachinery.pkg.apis.meta.v1.RootPaths", &[
        f("paths", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.apimachinery.pkg.apis.meta.v1.Status", &[
        f("details", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.apimachinery.pkg.apis.meta.v1.StatusDetails", &[
        f("causes", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.apimachinery.pkg.apis.meta.v1.Table", &[
        f("columnDefinitions", "", "", "atomic", &[], ""),
        f("rows", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.apimachinery.pkg.apis.meta.v1.TableRow", &[
        f("conditions", "", "", "atomic", &[], ""),
    ]),
    ("io.k8s.apimachinery.pkg.apis.meta.v1.UpdateOptions", &[
        f("dryRun", "", "", "atomic", &[], ""),
    ]),
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
