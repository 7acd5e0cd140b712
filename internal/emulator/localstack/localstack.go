// Package localstack starts LocalStack in a container through
// testcontainers-go, for the programs that offer
// BATCHWORK_EMULATOR=localstack (emulator.Options.Localstack): the
// integration tests and the development commands. It is a package of its
// own so that the emulator launcher, which the batchwork CLI links, does
// not pull in testcontainers-go and a Docker client.
package localstack

import (
	"context"
	"fmt"
	"os"

	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/modules/localstack"

	"github.com/batchwork/batchwork/internal/emulator"
)

var _ emulator.StartContainer = Start

// Start starts emulator.LocalstackImage and returns its endpoint and how
// to stop it. The container is also removed by testcontainers' reaper
// (Ryuk) if the process dies without calling stop.
func Start(ctx context.Context, region string) (url string, stop func() error, err error) {
	env := map[string]string{
		"SERVICES":       emulator.LocalstackServices,
		"DEFAULT_REGION": region,
	}
	if tok := os.Getenv(emulator.EnvLocalstackAuthToken); tok != "" {
		env[emulator.EnvLocalstackAuthToken] = tok
	}
	image := emulator.LocalstackImage

	// testcontainers panics (MustExtractDockerSocket) when there is no
	// Docker engine; turn that into an error.
	var c *localstack.LocalStackContainer
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("emulator: start %s (needs a Docker engine): %v", image, r)
			url, stop = "", nil
			if c != nil {
				_ = testcontainers.TerminateContainer(c)
			}
		}
	}()
	c, err = localstack.Run(ctx, image, testcontainers.WithEnv(env))
	if err != nil {
		if c != nil {
			_ = testcontainers.TerminateContainer(c)
		}
		return "", nil, fmt.Errorf("emulator: start %s (needs a Docker engine): %w", image, err)
	}
	url, err = c.PortEndpoint(ctx, "4566/tcp", "http")
	if err != nil {
		_ = testcontainers.TerminateContainer(c)
		return "", nil, fmt.Errorf("emulator: localstack endpoint: %w", err)
	}
	return url, func() error {
		if err := testcontainers.TerminateContainer(c); err != nil {
			return fmt.Errorf("emulator: terminate localstack container: %w", err)
		}
		return nil
	}, nil
}
