package deployments_test

import (
	"net"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/personaq/personaq/cmd/config"
)

// TestKubernetesAPIDeployment: the HTTP API runs as its own Deployment
// (`personaq api` on the config the replicas use, as the api NATS user,
// with its token from the Secret) behind its own Service, probed on
// /healthz of the port it listens on.
func TestKubernetesAPIDeployment(t *testing.T) {
	t.Parallel()
	b := loadBase(t)
	d := b.apiDeployment
	pod := d.Spec.Template
	require.Len(t, pod.Spec.Containers, 1)
	c := &pod.Spec.Containers[0]
	require.Equal(t, "api", c.Args[0])

	configPath := flagValue(t, c.Args, "--config")
	vol := volumeMountedAt(t, pod.Spec, c, path.Dir(configPath))
	require.NotNil(t, vol.ConfigMap)
	require.Equal(t, b.configMap.Name, vol.ConfigMap.Name, "the replicas' ConfigMap")
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.SecretKeyRef != nil:
			require.Equal(t, b.secret.Name, e.ValueFrom.SecretKeyRef.Name)
			require.Contains(t, b.secret.StringData, e.ValueFrom.SecretKeyRef.Key, "env %s", e.Name)
			env[e.Name] = "secret"
		}
	}
	require.Contains(t, env, "PERSONAQ_API_TOKEN", "a token with every scope, from the Secret")
	cfg, err := config.Parse([]byte(b.configMap.Data["personaq.yaml"]), func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	require.NoError(t, err, "the config loads with the API's environment")
	creds := volumeMountedAt(t, pod.Spec, c, path.Dir(cfg.NATS.CredsFile))
	require.NotNil(t, creds.Secret)
	require.Equal(t, b.secret.Name, creds.Secret.SecretName)
	require.Equal(t, "api.creds", path.Base(cfg.NATS.CredsFile), "its own NATS user (auth.conf's PERSONAQ_API)")

	_, port, err := net.SplitHostPort(flagValue(t, c.Args, "--listen"))
	require.NoError(t, err)
	require.Len(t, c.Ports, 1)
	require.Equal(t, port, strconv.Itoa(int(c.Ports[0].ContainerPort)))
	require.Equal(t, "/healthz", c.ReadinessProbe.HTTPGet.Path)
	require.Equal(t, c.Ports[0].Name, c.ReadinessProbe.HTTPGet.Port.StrVal)
	require.True(t, *pod.Spec.SecurityContext.RunAsNonRoot)
	require.True(t, *c.SecurityContext.ReadOnlyRootFilesystem)
	require.False(t, c.Resources.Limits.Memory().IsZero())

	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	require.NoError(t, err)
	require.True(t, sel.Matches(labels.Set(pod.Labels)))
	require.True(t, labels.SelectorFromSet(b.apiService.Spec.Selector).Matches(labels.Set(pod.Labels)), "Service selector")
	consumerSel, err := metav1.LabelSelectorAsSelector(b.deployment.Spec.Selector)
	require.NoError(t, err)
	require.False(t, consumerSel.Matches(labels.Set(pod.Labels)), "the replicas' Deployment does not adopt API pods")
	require.False(t, labels.SelectorFromSet(b.service.Spec.Selector).Matches(labels.Set(pod.Labels)), "nor the metrics Service")
	require.Equal(t, c.Ports[0].Name, b.apiService.Spec.Ports[0].TargetPort.StrVal)
}

// TestComposeRunsTheAPI: the compose file runs `personaq api` as its own
// service, as the api NATS user, after init, with its port on loopback,
// and the NATS servers get the api user's password.
func TestComposeRunsTheAPI(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join("compose", "docker-compose.yml"))
	require.NoError(t, err)
	var f struct {
		Version  string `json:"version"`
		Services map[string]struct {
			Image       string            `json:"image"`
			Command     []string          `json:"command"`
			Environment map[string]string `json:"environment"`
			Ports       []string          `json:"ports"`
			DependsOn   any               `json:"depends_on"` // a list or a map
			Volumes     []string          `json:"volumes"`
		} `json:"services"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &f))
	require.True(t, strings.HasPrefix(f.Version, "3."), "compose format 3.x")
	api, ok := f.Services["api"]
	require.True(t, ok, "an api service")
	require.Equal(t, f.Services["personaq"].Image, api.Image, "the personaq image")
	require.Equal(t, "api", api.Command[0])
	require.Contains(t, api.Command, "--listen")
	require.Equal(t, "api", api.Environment["PERSONAQ_NATS_USER"])
	require.Contains(t, api.Environment["PERSONAQ_NATS_PASSWORD"], "NATS_API_PASSWORD")
	require.Contains(t, api.Environment, "PERSONAQ_API_TOKEN")
	deps, ok := api.DependsOn.(map[string]any)
	require.True(t, ok, "depends_on with conditions")
	require.Equal(t, map[string]any{"condition": "service_completed_successfully"}, deps["init"])
	require.Len(t, api.Ports, 1)
	require.True(t, strings.HasPrefix(api.Ports[0], "127.0.0.1:"), "published on loopback only")
	require.Contains(t, f.Services["nats1"].Environment, "NATS_API_PASSWORD", "nats-server resolves every auth.conf password")
}
