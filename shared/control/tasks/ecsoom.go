package tasks

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

// ECSTaskStateChange is the part of ECS's "ECS Task State Change" event
// (EventBridge, source aws.ecs) that tells a Fargate executor stopped for
// memory. The construct's rule (infra/batchwork/oom.go) sends the sweep
// function only the executor cluster's stopped-for-memory events.
type ECSTaskStateChange struct {
	Source     string `json:"source"`
	DetailType string `json:"detail-type"`
	Detail     struct {
		TaskArn       string `json:"taskArn"`
		LastStatus    string `json:"lastStatus"`
		StoppedReason string `json:"stoppedReason"`
		Containers    []struct {
			Name   string `json:"name"`
			Reason string `json:"reason"`
		} `json:"containers"`
	} `json:"detail"`
}

// ecsOutOfMemory starts the reason ECS gives a container the kernel killed
// for its memory ("OutOfMemoryError: Container killed due to memory
// usage").
const ecsOutOfMemory = "OutOfMemoryError"

// ParseECSTaskStateChange reads raw as an ECS task state change event;
// false when it is none.
func ParseECSTaskStateChange(raw []byte) (ECSTaskStateChange, bool) {
	var ev ECSTaskStateChange
	if json.Unmarshal(raw, &ev) != nil || ev.Source != "aws.ecs" || ev.DetailType != "ECS Task State Change" {
		return ECSTaskStateChange{}, false
	}
	return ev, true
}

// OutOfMemory is the reason ECS stopped the task for memory, or "". Any
// status after the container's exit carries it (STOPPING, DEPROVISIONING,
// STOPPED): the first event seen marks the executor.
func (ev ECSTaskStateChange) OutOfMemory() string {
	for _, c := range ev.Detail.Containers {
		if strings.HasPrefix(c.Reason, ecsOutOfMemory) {
			return c.Name + ": " + c.Reason
		}
	}
	if strings.HasPrefix(ev.Detail.StoppedReason, ecsOutOfMemory) {
		return ev.Detail.StoppedReason
	}
	return ""
}

// ECSTaskStopped marks the executor of a Fargate task that ECS stopped for
// memory as killed for memory, so its claims end as out of memory when
// they lapse (oomkill.go) and retry one size up. Any other event is
// ignored (false).
func (s *Kills) ECSTaskStopped(ctx context.Context, ev ECSTaskStateChange) (bool, error) {
	why := ev.OutOfMemory()
	if why == "" {
		return false, nil
	}
	id := ExecutorIDForECSTask(ev.Detail.TaskArn)
	if id == "" {
		return false, fmt.Errorf("ECS task state change: taskArn %q names no task", ev.Detail.TaskArn)
	}
	if err := s.MarkExecutorKilled(ctx, id, why); err != nil {
		return false, err
	}
	s.log.Warn("Fargate executor stopped for memory", "executor", id, "task_arn", ev.Detail.TaskArn, "reason", why)
	return true, nil
}
