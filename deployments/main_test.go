// Package deployments_test checks the deployment examples beside it: the
// Kubernetes manifests decode strictly into upstream API types
// (deploy_test.go), and the least-privilege NATS config lets a real replica
// run and refuses it everything else (nats_perms_test.go). No cluster and no
// network are needed.
package deployments_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// Passwords of nats/auth.conf's users. nats-server resolves the config's
// $NATS_*_PASSWORD references from the process environment, so they are set
// once here rather than with t.Setenv (which would forbid t.Parallel).
var natsPasswords = map[string]string{
	"admin":     "admin-test-secret",
	"personaq":  "personaq-test-secret",
	"publisher": "publisher-test-secret",
	"api":       "api-test-secret",
}

func TestMain(m *testing.M) {
	for env, user := range map[string]string{
		"NATS_ADMIN_PASSWORD":     "admin",
		"NATS_PERSONAQ_PASSWORD":  "personaq",
		"NATS_PUBLISHER_PASSWORD": "publisher",
		"NATS_API_PASSWORD":       "api",
	} {
		if err := os.Setenv(env, natsPasswords[user]); err != nil {
			panic(err)
		}
	}
	// nats/regions: the leaf user's password, and the URL a region dials
	// with it (its port is replaced by the test's hub).
	for env, v := range map[string]string{
		"NATS_LEAF_PASSWORD": "leaf-test-secret",
		"NATS_LEAF_URL":      "nats-leaf://leaf:leaf-test-secret@127.0.0.1:7422",
	} {
		if err := os.Setenv(env, v); err != nil {
			panic(err)
		}
	}
	goleak.VerifyTestMain(m)
}
