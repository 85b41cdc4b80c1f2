package deployments_test

import (
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// runnableVariant is the ScaledObject that scales on
// personaq_runnable_backlog (prometheus scaler) instead of the consumers'
// lag: a file beside the base, used in place of scaledobject.yaml.
const runnableVariant = "scaledobject-runnable.yaml"

// prometheusParams are the trigger metadata keys KEDA's prometheus scaler
// reads (pkg/scalers/prometheus_scaler.go, prometheusMetadata, v2.21.0).
// Required: serverAddress, query, threshold.
var prometheusParams = map[string]string{
	"serverAddress":       "string",
	"query":               "string",
	"queryParameters":     "string",
	"threshold":           "float",
	"activationThreshold": "float",
	"namespace":           "string",
	"customHeaders":       "string",
	"ignoreNullValues":    "bool",
	"unsafeSsl":           "bool",
	"authModes":           "string",
}

func checkPrometheusMetadata(md map[string]any) error {
	for k, v := range md {
		kind, ok := prometheusParams[k]
		if !ok {
			return fmt.Errorf("metadata: unknown prometheus parameter %q", k)
		}
		s := v.(string)
		switch kind {
		case "float":
			if _, err := strconv.ParseFloat(s, 64); err != nil {
				return fmt.Errorf("metadata.%s: %q is not a number", k, s)
			}
		case "bool":
			if _, err := strconv.ParseBool(s); err != nil {
				return fmt.Errorf("metadata.%s: %q is not a boolean", k, s)
			}
		}
	}
	for _, k := range []string{"serverAddress", "query", "threshold"} {
		if md[k] == nil || md[k] == "" {
			return fmt.Errorf("metadata.%s: required", k)
		}
	}
	return nil
}

// TestKubernetesRunnableBacklogScaledObject: the variant passes KEDA's CRD
// schema, scales the same Deployment within the same bounds as the base's,
// and has one trigger per persona on its runnable backlog.
func TestKubernetesRunnableBacklogScaledObject(t *testing.T) {
	t.Parallel()
	b := loadBase(t)
	data := readFile(t, filepath.Join(k8sDir, runnableVariant))
	obj, err := decodeManifest(data)
	require.NoError(t, err)
	so := obj.(*scaledObject).Spec
	base := b.scaledObject.Spec
	require.Equal(t, base.ScaleTargetRef, so.ScaleTargetRef)
	require.Equal(t, *base.MinReplicaCount, *so.MinReplicaCount)
	require.Equal(t, *base.MaxReplicaCount, *so.MaxReplicaCount)
	var want, got []string
	for name := range b.config.PersonaConfigs {
		want = append(want, fmt.Sprintf(`max(personaq_runnable_backlog{persona=%q}) or vector(0)`, name))
	}
	for _, tr := range so.Triggers {
		require.Equal(t, "prometheus", tr.Type)
		got = append(got, tr.Metadata["query"])
	}
	sort.Strings(want)
	sort.Strings(got)
	require.Equal(t, want, got, "one trigger per persona")

	bad := strings.Replace(string(data), "threshold:", "treshold:", 1)
	_, err = decodeManifest([]byte(bad))
	require.ErrorContains(t, err, `"treshold"`)
}
