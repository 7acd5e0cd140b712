package main

import (
	"fmt"
	"time"
)

// printJobCPU prints what the job's run cost the cores: the runner's
// CPU and the emulators' a task, and the cores they kept busy on
// average. The simulator is not fed it (that would fit it to the job's
// outcome): it shows what the probe's figures missed when the two differ.
func printJobCPU(runner, emulators time.Duration, tasks int, took time.Duration) {
	if emulators <= 0 || tasks == 0 {
		return
	}
	t := time.Duration(tasks)
	fmt.Printf("    CPU over the job: the runner %.0f µs and the emulators %.0f µs a task, %.2f cores busy on average\n",
		us(runner/t), us(emulators/t), (runner+emulators).Seconds()/took.Seconds())
}
func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
