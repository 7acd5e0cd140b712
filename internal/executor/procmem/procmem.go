// Package procmem reads an executor process's memory: the size it was
// deployed as (EnvExecutorMemory), the limit it is killed at, and what it
// holds. The runner's memory watchdog and the hosts' memory report both
// read it, so it sits below both.
package procmem

import (
	"bytes"
	"fmt"
	"os"
	"runtime/metrics"
	"strconv"

	"github.com/batchwork/batchwork/shared/spec"
)

// EnvExecutorMemory is the executor's memory size ("4GiB", or bytes): one
// of spec.ExecutorSizes. Unset: the executor runs tasks of any size.
const EnvExecutorMemory = "BATCHWORK_EXECUTOR_MEMORY"

// SizeFromEnv reads the executor's size from EnvExecutorMemory.
func SizeFromEnv() (spec.Size, error) {
	v := os.Getenv(EnvExecutorMemory)
	if v == "" {
		return 0, nil
	}
	z, err := spec.ParseSize(v)
	if err != nil {
		return 0, fmt.Errorf("%s=%q: %w", EnvExecutorMemory, v, err)
	}
	for _, s := range spec.ExecutorSizes {
		if s == z {
			return z, nil
		}
	}
	return 0, fmt.Errorf("%s=%q: not one of the executor sizes %v", EnvExecutorMemory, v, spec.ExecutorSizes)
}

// LambdaLimit is the Lambda function's memory, from the runtime's
// AWS_LAMBDA_FUNCTION_MEMORY_SIZE (MiB): the limit the memory watchdog
// keeps the process under (executor.Runner.MemoryLimit). 0 off Lambda.
func LambdaLimit(getenv func(string) string) spec.Size {
	mb, err := strconv.ParseInt(getenv("AWS_LAMBDA_FUNCTION_MEMORY_SIZE"), 10, 64)
	if err != nil || mb <= 0 {
		return 0
	}
	return spec.Size(mb << 20)
}

// Limit is the memory the executor may use before it is killed: its
// Lambda function's, else its container's (the cgroup's limit), else its
// size (EnvExecutorMemory); 0 when unknown.
func Limit() uint64 {
	if l := LambdaLimit(os.Getenv); l > 0 {
		return uint64(l)
	}
	for _, f := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		// "max" (v2) or a huge number (v1) is no limit.
		if b, err := os.ReadFile(f); err == nil {
			if v, err := strconv.ParseUint(string(bytes.TrimSpace(b)), 10, 64); err == nil && v > 0 && v < 1<<50 {
				return v
			}
		}
	}
	if z, err := SizeFromEnv(); err == nil && z > 0 {
		return uint64(z)
	}
	return 0
}

// Held is the memory the Go runtime holds from the OS (mapped and not
// released).
func Held() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 || s[1].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64() - s[1].Value.Uint64()
}

// Resident is the process's resident memory (/proc/self/statm), or what
// the Go runtime holds from the OS (Held) where /proc is not there.
func Resident() uint64 {
	if b, err := os.ReadFile("/proc/self/statm"); err == nil {
		if f := bytes.Fields(b); len(f) > 1 {
			if pages, err := strconv.ParseUint(string(f[1]), 10, 64); err == nil {
				return pages * uint64(os.Getpagesize())
			}
		}
	}
	return Held()
}
