package lambdaenv

import (
	"strings"
	"testing"
)

// The sized ready queues are optional; when set they reach the control
// plane's queues, and a bad value is an error naming the variable.
func TestSizedQueuesFromEnv(t *testing.T) {
	for _, n := range EnvNames {
		t.Setenv(n, "x/"+n)
	}
	c, err := FromEnv()
	if err != nil || c.Queues.Sized != nil {
		t.Fatalf("without %s: %+v, %v; want no sized queues", EnvQueueSized, c.Queues, err)
	}
	t.Setenv(EnvQueueSized, "4GiB=x/q4,2GiB=x/q2")
	if c, err = FromEnv(); err != nil || c.Queues.Sized[4<<30] != "x/q4" || c.Queues.Sized[2<<30] != "x/q2" || len(c.Queues.Sized) != 2 {
		t.Fatalf("with %s: %+v, %v", EnvQueueSized, c.Queues, err)
	}
	t.Setenv(EnvQueueSized, "1GiB=x/q1")
	if _, err = FromEnv(); err == nil || !strings.Contains(err.Error(), EnvQueueSized) {
		t.Fatalf("the default size's queue: %v, want an error naming %s", err, EnvQueueSized)
	}
}
