package host

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/batchwork/batchwork/shared/control"
)

// EnvECSMetadataURI is the task metadata endpoint (version 4) that ECS
// gives every container of a task, Fargate included.
const EnvECSMetadataURI = "ECS_CONTAINER_METADATA_URI_V4"

// ecsMetadataTimeout bounds the metadata request (a local endpoint).
const ecsMetadataTimeout = 5 * time.Second

// ecsExecutorID is the executor id of the Fargate task this host runs in,
// derived from its task ARN (control.ExecutorIDForECSTask), so that when
// ECS stops the task for memory the control plane finds its liveness
// record from ECS's event (control.Service.ECSTaskStopped). "" outside ECS
// (getenv has no metadata endpoint): the poller then makes up an id.
func ecsExecutorID(ctx context.Context, getenv func(string) string, client *http.Client) (string, error) {
	uri := strings.TrimRight(getenv(EnvECSMetadataURI), "/")
	if uri == "" {
		return "", nil
	}
	ctx, cancel := context.WithTimeout(ctx, ecsMetadataTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, uri+"/task", nil)
	if err != nil {
		return "", fmt.Errorf("task metadata: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("task metadata: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("task metadata: %s", resp.Status)
	}
	var md struct {
		TaskARN string `json:"TaskARN"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&md); err != nil {
		return "", fmt.Errorf("task metadata: %w", err)
	}
	id := control.ExecutorIDForECSTask(md.TaskARN)
	if id == "" {
		return "", fmt.Errorf("task metadata: TaskARN %q names no task", md.TaskARN)
	}
	return id, nil
}
