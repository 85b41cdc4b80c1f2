package containers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
)

// Environment variables naming the images (see ResolveImages).
const (
	EnvNATSImage     = "PERSONAQ_NATS_IMAGE"
	EnvRedisImage    = "PERSONAQ_REDIS_IMAGE"
	EnvPersonaqImage = "PERSONAQ_IMAGE"
)

// Images integration/images/build.sh builds, and the official ones used
// when the engine has no local build.
const (
	LocalNATSImage     = "personaq/nats:local"
	LocalRedisImage    = "personaq/redis:local"
	LocalPersonaqImage = "personaq/personaq:local"
	OfficialNATSImage  = "nats:2.12-alpine"
	OfficialRedisImage = "redis:7"
)

// Label marks every container and volume these helpers create.
const Label = "io.personaq.integration"

// ErrNoDocker is returned by CheckDocker when no Docker engine answers.
var ErrNoDocker = errors.New("no Docker engine")

// Setup sets the testcontainers environment this package needs when it is
// unset: TESTCONTAINERS_RYUK_DISABLED=true (no Ryuk image without a
// registry; the helpers remove what they start) and
// TESTCONTAINERS_HOST_OVERRIDE=127.0.0.1 (mapped ports are on loopback; the
// default gateway testcontainers would otherwise dial from inside a
// container is not ours). Call it before any other function here.
func Setup() {
	for k, v := range map[string]string{
		"TESTCONTAINERS_RYUK_DISABLED": "true",
		"TESTCONTAINERS_HOST_OVERRIDE": "127.0.0.1",
	} {
		if os.Getenv(k) == "" {
			os.Setenv(k, v)
		}
	}
}

var (
	dockerOnce sync.Once
	dockerCli  *testcontainers.DockerClient
	dockerErr  error
)

// docker returns the shared engine client.
func docker(ctx context.Context) (*testcontainers.DockerClient, error) {
	dockerOnce.Do(func() {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		dockerCli, dockerErr = testcontainers.NewDockerClientWithOpts(ctx)
	})
	return dockerCli, dockerErr
}

// CheckDocker reports whether a Docker engine answers, and its version.
// The error wraps ErrNoDocker.
func CheckDocker(ctx context.Context) (string, error) {
	cli, err := docker(ctx)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrNoDocker, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	v, err := cli.ServerVersion(ctx, client.ServerVersionOptions{})
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrNoDocker, err)
	}
	return fmt.Sprintf("Docker %s (API %s)", v.Version, v.APIVersion), nil
}

// Images names the three images a suite runs.
type Images struct {
	NATS, Redis, Personaq string
}

// ResolveImages applies the rule of the package documentation: the
// environment variable, else the local build when the engine has it, else
// the official image. It fails only when no personaq image can be found.
func ResolveImages(ctx context.Context) (Images, error) {
	var im Images
	var err error
	if im.NATS, err = pick(ctx, EnvNATSImage, LocalNATSImage, OfficialNATSImage); err != nil {
		return im, err
	}
	if im.Redis, err = pick(ctx, EnvRedisImage, LocalRedisImage, OfficialRedisImage); err != nil {
		return im, err
	}
	if im.Personaq, err = pick(ctx, EnvPersonaqImage, LocalPersonaqImage, ""); err != nil {
		return im, err
	}
	if im.Personaq == "" {
		return im, fmt.Errorf("no personaq image: %s is not in the Docker engine and %s is unset; "+
			"build it with `make images` (or docker build -f deployments/Dockerfile -t %s .)",
			LocalPersonaqImage, EnvPersonaqImage, LocalPersonaqImage)
	}
	return im, nil
}

func pick(ctx context.Context, env, local, official string) (string, error) {
	if v := os.Getenv(env); v != "" {
		return v, nil
	}
	ok, err := HasImage(ctx, local)
	if err != nil {
		return "", err
	}
	if ok {
		return local, nil
	}
	return official, nil
}

// HasImage reports whether the engine has image locally.
func HasImage(ctx context.Context, image string) (bool, error) {
	cli, err := docker(ctx)
	if err != nil {
		return false, err
	}
	_, err = cli.ImageInspect(ctx, image)
	switch {
	case err == nil:
		return true, nil
	case cerrdefs.IsNotFound(err):
		return false, nil
	}
	return false, fmt.Errorf("inspect image %s: %w", image, err)
}
