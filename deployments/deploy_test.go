package deployments_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/personaq/personaq/cmd/config"
	"github.com/personaq/personaq/consumers/wire"
)

// k8sDir is the kustomize base under test.
const k8sDir = "kubernetes"

// apiName names the HTTP API's Deployment and Service.
const apiName = "personaq-api"

// kedaCRD is KEDA's ScaledObject CRD, copied from the keda module (see the
// file's header for version, path and checksum).
var kedaCRD = filepath.Join(k8sDir, "testdata", "keda.sh_scaledobjects.yaml")

// natsJetStreamParams are the trigger metadata keys KEDA's nats-jetstream
// scaler reads (pkg/scalers/nats_jetstream_scaler.go, natsJetStreamMetadata,
// in github.com/kedacore/keda/v2@v2.21.0). The CRD types trigger metadata as
// map[string]string, so the schema cannot catch a misspelled key there;
// KEDA would silently use a default. Required: the endpoint, stream,
// consumer, and account or accountID.
var natsJetStreamParams = map[string]string{
	"natsServerMonitoringEndpoint": "string",
	"account":                      "string",
	"accountID":                    "string",
	"stream":                       "string",
	"consumer":                     "string",
	"lagThreshold":                 "int",
	"activationLagThreshold":       "int",
	"useHttps":                     "bool",
}

// kustomization is the part of kustomize's Kustomization this base uses.
// Decoding is strict, so a field outside it — misspelled, or simply not
// modelled here — fails the test rather than being ignored.
type kustomization struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Labels     []struct {
		Pairs            map[string]string `json:"pairs"`
		IncludeSelectors bool              `json:"includeSelectors"`
		IncludeTemplates bool              `json:"includeTemplates,omitempty"`
	} `json:"labels,omitempty"`
	Resources          []string `json:"resources"`
	ConfigMapGenerator []struct {
		Name  string   `json:"name"`
		Files []string `json:"files"`
	} `json:"configMapGenerator"`
	Images []struct {
		Name    string `json:"name"`
		NewName string `json:"newName,omitempty"`
		NewTag  string `json:"newTag,omitempty"`
		Digest  string `json:"digest,omitempty"`
	} `json:"images,omitempty"`
}

// scaledObject is what the cross-checks read from the ScaledObject; the
// schema check covers the whole document.
type scaledObject struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       struct {
		ScaleTargetRef struct {
			Name string `json:"name"`
			Kind string `json:"kind"`
		} `json:"scaleTargetRef"`
		MinReplicaCount *int32 `json:"minReplicaCount"`
		MaxReplicaCount *int32 `json:"maxReplicaCount"`
		Triggers        []struct {
			Type     string            `json:"type"`
			Name     string            `json:"name"`
			Metadata map[string]string `json:"metadata"`
		} `json:"triggers"`
	} `json:"spec"`
}

// base is the decoded kustomize base.
type base struct {
	kustomization kustomization
	configMap     *corev1.ConfigMap // as configMapGenerator makes it
	config        *config.File      // the ConfigMap's personaq.yaml, loaded by personaq
	deployment    *appsv1.Deployment
	service       *corev1.Service
	apiDeployment *appsv1.Deployment // personaq-api: the HTTP API
	apiService    *corev1.Service
	pdb           *policyv1.PodDisruptionBudget
	secret        *corev1.Secret // secret.example.yaml (not a resource of the base)
	scaledObject  *scaledObject
}

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(name)
	require.NoError(t, err)
	return data
}

// decodeStrict decodes one manifest into T the way the API server's
// strict field validation does: YAML → JSON rejecting duplicate keys, then
// sigs.k8s.io/json, case-sensitive, rejecting unknown and duplicate fields.
// (sigs.k8s.io/yaml's own UnmarshalStrict is not enough: it decodes with
// encoding/json, whose field matching ignores case, so "targetport" would
// pass for "targetPort".)
func decodeStrict[T any](data []byte) (*T, error) {
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, err
	}
	v := new(T)
	strict, err := sigsjson.UnmarshalStrict(j, v, sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
	if err != nil {
		return nil, err
	}
	if len(strict) > 0 {
		return nil, errors.Join(strict...)
	}
	return v, nil
}

// decodeManifest checks one resource file: strictly into its upstream type
// (the ScaledObject: against KEDA's CRD schema) and returns it.
func decodeManifest(data []byte) (any, error) {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(data, &tm); err != nil {
		return nil, err
	}
	switch tm.APIVersion + " " + tm.Kind {
	case "apps/v1 Deployment":
		return decodeStrict[appsv1.Deployment](data)
	case "v1 Service":
		return decodeStrict[corev1.Service](data)
	case "v1 ConfigMap":
		return decodeStrict[corev1.ConfigMap](data)
	case "v1 Secret":
		return decodeStrict[corev1.Secret](data)
	case "policy/v1 PodDisruptionBudget":
		return decodeStrict[policyv1.PodDisruptionBudget](data)
	case "keda.sh/v1alpha1 ScaledObject":
		if err := validateScaledObject(data); err != nil {
			return nil, err
		}
		// The schema was strict; this struct only holds what the cross-checks read.
		so := new(scaledObject)
		return so, yaml.Unmarshal(data, so)
	}
	return nil, fmt.Errorf("no upstream type for %s %s", tm.APIVersion, tm.Kind)
}

func loadBase(t *testing.T) *base {
	t.Helper()
	b := &base{}
	k, err := decodeStrict[kustomization](readFile(t, filepath.Join(k8sDir, "kustomization.yaml")))
	require.NoError(t, err, "kustomization.yaml")
	b.kustomization = *k
	require.Equal(t, "kustomize.config.k8s.io/v1beta1", k.APIVersion)
	require.Equal(t, "Kustomization", k.Kind)

	for _, res := range append(slices.Clone(k.Resources), "secret.example.yaml") {
		obj, err := decodeManifest(readFile(t, filepath.Join(k8sDir, res)))
		require.NoError(t, err, "%s", res)
		switch o := obj.(type) {
		case *appsv1.Deployment:
			if o.Name == apiName {
				b.apiDeployment = o
				continue
			}
			require.Nil(t, b.deployment, "%s: one consumer Deployment", res)
			b.deployment = o
		case *corev1.Service:
			if o.Name == apiName {
				b.apiService = o
				continue
			}
			require.Nil(t, b.service, "%s: one metrics Service", res)
			b.service = o
		case *policyv1.PodDisruptionBudget:
			b.pdb = o
		case *corev1.Secret:
			b.secret = o
		case *scaledObject:
			b.scaledObject = o
		default:
			t.Fatalf("%s: unexpected %T", res, obj)
		}
	}
	require.NotNil(t, b.deployment, "a Deployment")
	require.NotNil(t, b.service, "a Service")
	require.NotNil(t, b.apiDeployment, "the API's Deployment")
	require.NotNil(t, b.apiService, "the API's Service")
	require.NotNil(t, b.pdb, "a PodDisruptionBudget")
	require.NotNil(t, b.scaledObject, "a ScaledObject")
	require.NotNil(t, b.secret, "secret.example.yaml")

	require.Len(t, k.ConfigMapGenerator, 1)
	gen := k.ConfigMapGenerator[0]
	require.Equal(t, []string{"personaq.yaml"}, gen.Files)
	cfgData := readFile(t, filepath.Join(k8sDir, "personaq.yaml"))
	b.configMap = &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: gen.Name},
		Data:       map[string]string{"personaq.yaml": string(cfgData)},
	}
	// personaq's own loader decodes strictly too (unknown keys are errors),
	// with the environment the Deployment gives the container.
	b.config, err = config.Parse(cfgData, b.containerEnv(t))
	require.NoError(t, err, "kubernetes/personaq.yaml")
	return b
}

// container is the personaq container of the Deployment.
func (b *base) container(t *testing.T) *corev1.Container {
	t.Helper()
	cs := b.deployment.Spec.Template.Spec.Containers
	require.Len(t, cs, 1)
	return &cs[0]
}

// containerEnv resolves the container's environment: literal values as
// they are, Secret keys (which must exist in secret.example.yaml) as
// "secret:<name>/<key>".
func (b *base) containerEnv(t *testing.T) func(string) (string, bool) {
	t.Helper()
	env := map[string]string{}
	for _, e := range b.container(t).Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			require.Equal(t, b.secret.Name, ref.Name, "env %s: secret", e.Name)
			require.Contains(t, b.secret.StringData, ref.Key, "env %s: key of %s", e.Name, ref.Name)
			env[e.Name] = "secret:" + ref.Name + "/" + ref.Key
		default:
			t.Fatalf("env %s: unexpected source", e.Name)
		}
	}
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

func TestKubernetesManifestsDecodeStrictly(t *testing.T) {
	t.Parallel()
	b := loadBase(t)

	// Every manifest in the directory is checked: a resource of the base or
	// one of the files beside it.
	entries, err := os.ReadDir(k8sDir)
	require.NoError(t, err)
	known := append(slices.Clone(b.kustomization.Resources), "kustomization.yaml", "personaq.yaml", "secret.example.yaml", runnableVariant)
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".yaml") {
			require.Contains(t, known, e.Name(), "%s is neither a resource of kustomization.yaml nor a known file", e.Name())
		}
	}
	// The generated ConfigMap is a valid core/v1 ConfigMap too.
	data, err := yaml.Marshal(b.configMap)
	require.NoError(t, err)
	_, err = decodeManifest(data)
	require.NoError(t, err)
}

// TestKubernetesStrictDecodingRejectsMisspelledFields proves the decoding
// is strict: each manifest with one field misspelled (or mistyped) fails.
func TestKubernetesStrictDecodingRejectsMisspelledFields(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, file, from, to, want string
	}{
		{"APIDeploymentPort", "api-deployment.yaml", "containerPort:", "containerport:", `unknown field "spec.template.spec.containers[0].ports[0].containerport"`},
		{"APIServicePort", "api-service.yaml", "targetPort:", "targetport:", `unknown field "spec.ports[0].targetport"`},
		{"DeploymentProbe", "deployment.yaml", "readinessProbe:", "readinesProbe:", `unknown field "spec.template.spec.containers[0].readinesProbe"`},
		{"DeploymentGracePeriod", "deployment.yaml", "terminationGracePeriodSeconds:", "terminationGracePeriodSecond:", `unknown field "spec.template.spec.terminationGracePeriodSecond"`},
		{"DeploymentWrongType", "deployment.yaml", "runAsNonRoot: true", "runAsNonRoot: yes-please", "runAsNonRoot"},
		{"ServiceTargetPort", "service.yaml", "targetPort:", "targetport:", `unknown field "spec.ports[0].targetport"`},
		{"PDB", "pdb.yaml", "maxUnavailable:", "maxUnavailabe:", `unknown field "spec.maxUnavailabe"`},
		{"Secret", "secret.example.yaml", "stringData:", "stringdata:", `unknown field "stringdata"`},
		{"ScaledObjectSpec", "scaledobject.yaml", "minReplicaCount:", "minReplicasCount:", "minReplicasCount"},
		{"ScaledObjectAdvanced", "scaledobject.yaml", "stabilizationWindowSeconds:", "stabilisationWindowSeconds:", "stabilisationWindowSeconds"},
		{"ScaledObjectWrongType", "scaledobject.yaml", "pollingInterval: 15", `pollingInterval: "15"`, "pollingInterval"},
		{"ScaledObjectMetadata", "scaledobject.yaml", "  name: personaq\n  labels:", "  name: personaq\n  lables:", `unknown field "metadata.lables"`},
		{"TriggerMetadataKey", "scaledobject.yaml", "lagThreshold:", "lagTreshold:", `"lagTreshold"`},
		{"TriggerMetadataValue", "scaledobject.yaml", `lagThreshold: "16"`, `lagThreshold: "sixteen"`, "lagThreshold"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			orig := string(readFile(t, filepath.Join(k8sDir, tc.file)))
			require.Contains(t, orig, tc.from, "the mutation must apply")
			_, err := decodeManifest([]byte(orig))
			require.NoError(t, err, "unmutated %s", tc.file)
			_, err = decodeManifest([]byte(strings.Replace(orig, tc.from, tc.to, 1)))
			require.Error(t, err, "%s with %q must be rejected", tc.file, tc.to)
			require.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestKubernetesDeploymentMatchesConfig(t *testing.T) {
	t.Parallel()
	b := loadBase(t)
	d, c := b.deployment, b.container(t)
	pod := d.Spec.Template

	t.Run("ConfigMount", func(t *testing.T) {
		configPath := flagValue(t, c.Args, "--config")
		vol := volumeMountedAt(t, pod.Spec, c, path.Dir(configPath))
		require.NotNil(t, vol.ConfigMap, "the config directory is a ConfigMap volume")
		require.Equal(t, b.configMap.Name, vol.ConfigMap.Name, "the generated ConfigMap")
		require.Contains(t, b.configMap.Data, path.Base(configPath))
		require.Equal(t, "serve", c.Args[0])
	})

	t.Run("Secrets", func(t *testing.T) {
		creds := b.config.NATS.CredsFile
		require.NotEmpty(t, creds, "PERSONAQ_NATS_CREDS_FILE reaches the config")
		vol := volumeMountedAt(t, pod.Spec, c, path.Dir(creds))
		require.NotNil(t, vol.Secret)
		require.Equal(t, b.secret.Name, vol.Secret.SecretName)
		var paths []string
		for _, it := range vol.Secret.Items {
			require.Contains(t, b.secret.StringData, it.Key)
			paths = append(paths, it.Path)
		}
		require.Contains(t, paths, path.Base(creds))
		require.Equal(t, "secret:personaq-secrets/redis-password", b.config.Redis.Password,
			"PERSONAQ_REDIS_PASSWORD reaches the config")
	})

	t.Run("Probes", func(t *testing.T) {
		_, port, err := net.SplitHostPort(flagValue(t, c.Args, "--metrics-addr"))
		require.NoError(t, err)
		metricsPort, err := strconv.Atoi(port)
		require.NoError(t, err)
		named := map[string]int32{}
		for _, p := range c.Ports {
			named[p.Name] = p.ContainerPort
		}
		for name, probe := range map[string]*corev1.Probe{"/readyz": c.ReadinessProbe, "/healthz": c.LivenessProbe} {
			require.NotNil(t, probe, "probe %s", name)
			require.NotNil(t, probe.HTTPGet, "probe %s", name)
			require.Equal(t, name, probe.HTTPGet.Path)
			p := probe.HTTPGet.Port
			if p.StrVal != "" {
				require.Contains(t, named, p.StrVal, "probe %s: named port", name)
				require.EqualValues(t, metricsPort, named[p.StrVal], "probe %s: the --metrics-addr port", name)
			} else {
				require.EqualValues(t, metricsPort, p.IntVal, "probe %s", name)
			}
		}
		require.Equal(t, "/readyz", c.ReadinessProbe.HTTPGet.Path)
		require.Equal(t, "/healthz", c.LivenessProbe.HTTPGet.Path)
	})

	t.Run("GracePeriodAboveDrain", func(t *testing.T) {
		// After drain_timeout the runtime cancels what is left and gives
		// handlers up to 5s more (consumers/subscription.go) before exiting.
		drain := b.config.Runtime.DrainTimeout.Std()
		require.Positive(t, drain)
		grace := time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
		require.Greater(t, grace, drain+5*time.Second, "terminationGracePeriodSeconds vs runtime.drain_timeout")
	})

	t.Run("NonRoot", func(t *testing.T) {
		sc := pod.Spec.SecurityContext
		require.NotNil(t, sc)
		require.True(t, *sc.RunAsNonRoot)
		require.EqualValues(t, 65532, *sc.RunAsUser, "the image's USER (deployments/Dockerfile)")
		csc := c.SecurityContext
		require.NotNil(t, csc)
		require.False(t, *csc.AllowPrivilegeEscalation)
		require.True(t, *csc.ReadOnlyRootFilesystem)
		require.Equal(t, []corev1.Capability{"ALL"}, csc.Capabilities.Drop)
		require.False(t, c.Resources.Requests.Cpu().IsZero(), "cpu request")
		require.False(t, c.Resources.Requests.Memory().IsZero(), "memory request")
		require.False(t, c.Resources.Limits.Memory().IsZero(), "memory limit")
	})

	t.Run("Selectors", func(t *testing.T) {
		podLabels := labels.Set(pod.Labels)
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		require.NoError(t, err)
		require.True(t, sel.Matches(podLabels), "Deployment selector")
		pdbSel, err := metav1.LabelSelectorAsSelector(b.pdb.Spec.Selector)
		require.NoError(t, err)
		require.True(t, pdbSel.Matches(podLabels), "PodDisruptionBudget selector")
		require.True(t, labels.SelectorFromSet(b.service.Spec.Selector).Matches(podLabels), "Service selector")
		require.Len(t, b.service.Spec.Ports, 1)
		require.Equal(t, "metrics", b.service.Spec.Ports[0].TargetPort.StrVal)
		require.Equal(t, d.Name, b.scaledObject.Spec.ScaleTargetRef.Name, "ScaledObject target")
	})

	t.Run("ScaledObjectTriggers", func(t *testing.T) {
		so := b.scaledObject.Spec
		topo := b.config.Topology().WithDefaults()
		var want, got []string
		for name := range b.config.PersonaConfigs {
			want = append(want, wire.Durable(name))
		}
		account := natsAccount(t)
		for _, tr := range so.Triggers {
			require.Equal(t, "nats-jetstream", tr.Type)
			require.Equal(t, topo.RequestsStream, tr.Metadata["stream"], "trigger %s", tr.Name)
			require.Equal(t, account, tr.Metadata["account"], "trigger %s: the account of nats/auth.conf", tr.Name)
			got = append(got, tr.Metadata["consumer"])
		}
		sort.Strings(want)
		sort.Strings(got)
		require.Equal(t, want, got, "one trigger per persona consumer")
		require.NotNil(t, so.MinReplicaCount)
		require.NotNil(t, so.MaxReplicaCount)
		require.LessOrEqual(t, *so.MinReplicaCount, *so.MaxReplicaCount)
		for name, p := range b.config.PersonaConfigs {
			require.GreaterOrEqual(t, p.MaxReplicas, int(*so.MaxReplicaCount),
				"persona %s: max_replicas sizes MaxAckPending; replicas above it would get no work", name)
		}
	})
}

func flagValue(t *testing.T, args []string, name string) string {
	t.Helper()
	for i, a := range args {
		if a == name && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	t.Fatalf("no %s in %q", name, args)
	return ""
}

func volumeMountedAt(t *testing.T, spec corev1.PodSpec, c *corev1.Container, dir string) *corev1.Volume {
	t.Helper()
	for _, m := range c.VolumeMounts {
		if m.MountPath == dir {
			for i := range spec.Volumes {
				if spec.Volumes[i].Name == m.Name {
					return &spec.Volumes[i]
				}
			}
			t.Fatalf("volume %s (mounted at %s) not defined", m.Name, dir)
		}
	}
	t.Fatalf("nothing mounted at %s", dir)
	return nil
}

// natsAccount is the one account nats/auth.conf defines for personaq.
func natsAccount(t *testing.T) string {
	t.Helper()
	opts, err := server.ProcessConfigFile(natsConfig)
	require.NoError(t, err)
	var names []string
	for _, a := range opts.Accounts {
		if a.Name != server.DEFAULT_SYSTEM_ACCOUNT && a.Name != server.DEFAULT_GLOBAL_ACCOUNT {
			names = append(names, a.Name)
		}
	}
	require.Len(t, names, 1, "accounts of %s", natsConfig)
	return names[0]
}

// validateScaledObject checks a ScaledObject against the openAPIV3Schema of
// KEDA's CRD, with every object that lists its properties closed to others
// (the API server would prune unknown fields silently; we want them to
// fail), its metadata strictly as an ObjectMeta, and each nats-jetstream
// trigger's metadata against the scaler's parameters.
func validateScaledObject(data []byte) error {
	sch, err := scaledObjectSchema()
	if err != nil {
		return err
	}
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		return err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
	if err != nil {
		return err
	}
	if err := sch.Validate(doc); err != nil {
		return fmt.Errorf("ScaledObject does not match KEDA v2.21.0's CRD schema: %w", err)
	}
	type object struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Metadata   metav1.ObjectMeta `json:"metadata"`
		Spec       map[string]any    `json:"spec"`
	}
	so, err := decodeStrict[object](data)
	if err != nil {
		return err
	}
	if so.APIVersion != "keda.sh/v1alpha1" || so.Kind != "ScaledObject" {
		return fmt.Errorf("want keda.sh/v1alpha1 ScaledObject, got %s %s", so.APIVersion, so.Kind)
	}
	triggers, _ := so.Spec["triggers"].([]any)
	for i, tr := range triggers {
		tm := tr.(map[string]any)
		check := checkNATSJetStreamMetadata
		switch tm["type"] {
		case "nats-jetstream":
		case "prometheus":
			check = checkPrometheusMetadata
		default:
			return fmt.Errorf("triggers[%d]: type %v: only nats-jetstream and prometheus are checked here", i, tm["type"])
		}
		if err := check(tm["metadata"].(map[string]any)); err != nil {
			return fmt.Errorf("triggers[%d] (%v): %w", i, tm["name"], err)
		}
	}
	return nil
}

func checkNATSJetStreamMetadata(md map[string]any) error {
	for k, v := range md {
		kind, ok := natsJetStreamParams[k]
		if !ok {
			return fmt.Errorf("metadata: unknown nats-jetstream parameter %q", k)
		}
		s := v.(string)
		switch kind {
		case "int":
			if _, err := strconv.ParseInt(s, 10, 64); err != nil {
				return fmt.Errorf("metadata.%s: %q is not an integer", k, s)
			}
		case "bool":
			if _, err := strconv.ParseBool(s); err != nil {
				return fmt.Errorf("metadata.%s: %q is not a boolean", k, s)
			}
		}
	}
	for _, k := range []string{"natsServerMonitoringEndpoint", "stream", "consumer"} {
		if md[k] == nil || md[k] == "" {
			return fmt.Errorf("metadata.%s: required", k)
		}
	}
	if md["account"] == nil && md["accountID"] == nil {
		return fmt.Errorf("metadata: account or accountID required")
	}
	return nil
}

var recordedSHA = regexp.MustCompile(`(?m)^# sha256 of that file: ([0-9a-f]{64})$`)

// scaledObjectSchema compiles the CRD's schema after checking the copy is
// byte for byte the file its header names.
func scaledObjectSchema() (*jsonschema.Schema, error) {
	raw, err := os.ReadFile(kedaCRD)
	if err != nil {
		return nil, err
	}
	m := recordedSHA.FindSubmatch(raw)
	start := bytes.Index(raw, []byte("\n---\n"))
	if m == nil || start < 0 {
		return nil, fmt.Errorf("%s: header with the sha256 and a --- line expected", kedaCRD)
	}
	body := raw[start+1:]
	if sum := sha256.Sum256(body); hex.EncodeToString(sum[:]) != string(m[1]) {
		return nil, fmt.Errorf("%s: content changed since it was copied (sha256 %x, header says %s)", kedaCRD, sum, m[1])
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Name   string `json:"name"`
				Schema struct {
					OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(bytes.TrimPrefix(body, []byte("---\n")), &crd); err != nil {
		return nil, err
	}
	var schema map[string]any
	for _, v := range crd.Spec.Versions {
		if v.Name == "v1alpha1" {
			schema = v.Schema.OpenAPIV3Schema
		}
	}
	if schema == nil {
		return nil, fmt.Errorf("%s: no v1alpha1 schema", kedaCRD)
	}
	closeObjects(schema)
	// Round-trip through JSON so numbers are what the compiler expects.
	j, err := yaml.Marshal(schema)
	if err != nil {
		return nil, err
	}
	if j, err = yaml.YAMLToJSON(j); err != nil {
		return nil, err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft4) // OpenAPI 3.0 schemas are draft-4 style
	const loc = "keda.sh_scaledobjects.v1alpha1.json"
	if err := c.AddResource(loc, doc); err != nil {
		return nil, err
	}
	return c.Compile(loc)
}

// closeObjects sets additionalProperties: false on every object schema that
// lists properties and says nothing about others (Kubernetes prunes such
// unknowns; strict validation rejects them).
func closeObjects(v any) {
	switch s := v.(type) {
	case map[string]any:
		if _, ok := s["properties"]; ok {
			_, has := s["additionalProperties"]
			if preserve, _ := s["x-kubernetes-preserve-unknown-fields"].(bool); !has && !preserve {
				s["additionalProperties"] = false
			}
		}
		for _, c := range s {
			closeObjects(c)
		}
	case []any:
		for _, c := range s {
			closeObjects(c)
		}
	}
}
