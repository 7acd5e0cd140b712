package emulator

import (
	"context"
	"fmt"
	"os"

	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/modules/localstack"
)

type localstackContainer struct {
	c *localstack.LocalStackContainer
}

func (l localstackContainer) stop() error {
	if err := testcontainers.TerminateContainer(l.c); err != nil {
		return fmt.Errorf("emulator: terminate localstack container: %w", err)
	}
	return nil
}

// startLocalstack starts LocalstackImage through testcontainers-go. The
// container is also removed by testcontainers' reaper (Ryuk) if the test
// process dies without calling Stop.
func startLocalstack(ctx context.Context, region string) (e *Emulator, err error) {
	env := map[string]string{
		"SERVICES":       LocalstackServices,
		"DEFAULT_REGION": region,
	}
	if tok := os.Getenv(EnvLocalstackAuthToken); tok != "" {
		env[EnvLocalstackAuthToken] = tok
	}

	// testcontainers panics (MustExtractDockerSocket) when there is no
	// Docker engine; turn that into an error.
	var c *localstack.LocalStackContainer
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("emulator: start %s (needs a Docker engine): %v", LocalstackImage, r)
			e = nil
			if c != nil {
				_ = testcontainers.TerminateContainer(c)
			}
		}
	}()
	c, err = localstack.Run(ctx, LocalstackImage, testcontainers.WithEnv(env))
	if err != nil {
		if c != nil {
			_ = testcontainers.TerminateContainer(c)
		}
		return nil, fmt.Errorf("emulator: start %s (needs a Docker engine): %w", LocalstackImage, err)
	}
	url, err := c.PortEndpoint(ctx, "4566/tcp", "http")
	if err != nil {
		_ = testcontainers.TerminateContainer(c)
		return nil, fmt.Errorf("emulator: localstack endpoint: %w", err)
	}
	e = newEmulator(url, region, KindLocalstack)
	e.container = localstackContainer{c: c}
	return e, nil
}
