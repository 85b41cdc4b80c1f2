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
}

func TestMain(m *testing.M) {
	for env, user := range map[string]string{
		"NATS_ADMIN_PASSWORD":     "admin",
		"NATS_PERSONAQ_PASSWORD":  "personaq",
		"NATS_PUBLISHER_PASSWORD": "publisher",
	} {
		if err := os.Setenv(env, natsPasswords[user]); err != nil {
			panic(err)
		}
	}
	goleak.VerifyTestMain(m)
}
