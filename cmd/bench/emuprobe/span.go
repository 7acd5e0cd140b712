package emuprobe

import (
	"fmt"
	"time"
)

// Span is the CPU the machine spent over a job: the runner's (this
// process), DynamoDB Local's, moto's, and other work's. It is printed
// beside the prediction, never fed to it (that would fit the model to the
// job): it shows which probed input the job's run departed from.
type Span struct {
	own, java, emu time.Duration
	others         Others
}

// StartSpan starts measuring.
func StartSpan() Span {
	j, _ := EmulatorCPUOf(dynamoLocal)
	e, _ := EmulatorCPU()
	return Span{own: CPUTime(), java: j, emu: e, others: StartOthers()}
}

// Describe is the span's CPU per task of tasks, and the cores busy; and
// the cores other work left over it.
func (s Span) Describe(tasks int) (string, float64) {
	j, _ := EmulatorCPUOf(dynamoLocal)
	e, _ := EmulatorCPU()
	own, took := CPUTime()-s.own, time.Since(s.others.at)
	if tasks == 0 || took <= 0 {
		return "", 0
	}
	other := s.others.Cores()
	t := float64(tasks)
	ours := own + e - s.emu
	return fmt.Sprintf("CPU over the job, a task: the runner %.0f µs, DynamoDB Local %.0f µs, moto %.0f µs; %.2f cores busy with them, %.2f with other work",
		us(own)/t, us(j-s.java)/t, us(e-s.emu-(j-s.java))/t, ours.Seconds()/took.Seconds(), other), CoresLeft(other)
}

// Busy is the cores each process kept busy since the span started.
func (s Span) Busy() string {
	j, _ := EmulatorCPUOf(dynamoLocal)
	e, _ := EmulatorCPU()
	took := time.Since(s.others.at).Seconds()
	if took <= 0 {
		return ""
	}
	return fmt.Sprintf("cores busy: the runner %.2f, DynamoDB Local %.2f, moto %.2f",
		(CPUTime()-s.own).Seconds()/took, (j-s.java).Seconds()/took, (e-s.emu-(j-s.java)).Seconds()/took)
}
