package localstack

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/batchwork/batchwork/internal/emulator"
)

// TestLocalstack runs only with BATCHWORK_EMULATOR=localstack (needs Docker).
func TestLocalstack(t *testing.T) {
	if os.Getenv(emulator.EnvEmulator) != emulator.KindLocalstack || os.Getenv(emulator.EnvEndpointURL) != "" {
		t.Skip("set BATCHWORK_EMULATOR=localstack (and have Docker) to run")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	e, err := emulator.StartWith(ctx, emulator.Options{Localstack: Start})
	if err != nil {
		t.Fatalf("Start localstack: %v", err)
	}
	defer func() {
		if err := e.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
	}()
	if e.Kind != emulator.KindLocalstack {
		t.Fatalf("Kind = %s", e.Kind)
	}
	cfg := e.AWSConfig()
	if _, err := dynamodb.NewFromConfig(cfg).ListTables(ctx, &dynamodb.ListTablesInput{}); err != nil {
		t.Fatalf("ListTables: %v", err)
	}
	if _, err := sqs.NewFromConfig(cfg).ListQueues(ctx, &sqs.ListQueuesInput{}); err != nil {
		t.Fatalf("ListQueues: %v", err)
	}
	if err := e.Reset(ctx); !errors.Is(err, emulator.ErrResetNotSupported) {
		t.Fatalf("Reset = %v, want emulator.ErrResetNotSupported", err)
	}
}
