package sim

import (
	"math"
	"testing"
	"time"
)

// loggedRun is one emulator job of `make bench` as its log printed it:
// the simulator's measured inputs (the probes', the job's requests a
// task and the runner's CPU a task) and what the job measured.
type loggedRun struct {
	name   string
	stages []int
	slots  int
	m      Measured
	p      Profile
	// rate is the job's measured tasks a second, queued its time to the
	// last task queued (0: not printed).
	rate   float64
	queued float64
	// doneByQueued is the tasks committed when the last was queued (0:
	// not printed).
	doneByQueued int
	// over: the job ran slower than its probes allow (the machine busier
	// during it than around it), which no input the model takes shows.
	over bool
	// under: the probes ran with other work on the machine (Cores well
	// under 2) that the job did not have, so the model, given the
	// probes' cores, predicts the job slower than it ran. Only the sign
	// is checked: how much of the other work the job had is not known.
	under bool
}

// loggedShare is the send's share (Measured.SendShare) the runs below
// replay at: their probes did not yet measure it. It is the SQS probe's
// reading on this machine, 1.10 to 1.18 in five runs of its split
// (cmd/bench/emuprobe, sqssplit.go).
const loggedShare = 1.13

// doneTolerance bounds the tasks committed by the last task queued:
// the executors' share of moto while the chains send, a small number
// (about 2% of the load job) that a second's difference moves by a tenth.
const doneTolerance = 0.25

func us(n float64) time.Duration { return time.Duration(n * float64(time.Microsecond)) }
func msec(n float64) time.Duration {
	return time.Duration(n * float64(time.Millisecond))
}

// loggedRuns are runs of `make bench` on the 2-core machine: the
// throughput job (2,000 tasks and a fan-in task) alone with 16, 32 and 64
// slots, a full bench's throughput and 100,000-task load jobs, and the
// throughput and load jobs alone (tp16 d to g, load b and c); each
// input is what the run's simulator lines printed, the job's reads a task
// its requests table's GetItem, BatchGetItem and Query. tp16-c ran at 62%
// of its mix probe's floor with the load average at 2.6: DynamoDB Local
// spent 3,733 µs a task in the job against 2,192 at the probe's best
// level, a machine busier during the job than around it. tp16 d's probes
// left it 1.72 cores (other work took the rest). Batched load c and d ran
// the load job alone and printed the tasks committed by its last task
// queued. The split runs are a full bench whose SQS probe measured a
// send's share itself.
var loggedRuns = []loggedRun{
	{name: "tp16-a", stages: []int{2000, 1}, slots: 16, rate: 311,
		m: Measured{DynamoRate: 914, SQSRate: 242, DynamoLatency: msec(1.4), SQSLatency: msec(3.9), Cores: 2, IdleCores: 0.02,
			DynamoCPU: us(1319), SQSCPU: us(3971), RunnerCPU: us(587), MixDynamoRate: 374 * 2.07, MixSQSCPU: us(3699)},
		p: Profile{DynamoRequests: 2.17, DynamoReads: 0.047, SQSRequests: 0.34}},
	{name: "tp16-b", stages: []int{2000, 1}, slots: 16, rate: 347,
		m: Measured{DynamoRate: 1030, SQSRate: 305, DynamoLatency: msec(1.2), SQSLatency: msec(3.3), Cores: 2, IdleCores: 0.03,
			DynamoCPU: us(1225), SQSCPU: us(3723), RunnerCPU: us(523), MixDynamoRate: 406 * 2.07, MixSQSCPU: us(3629)},
		p: Profile{DynamoRequests: 2.17, DynamoReads: 0.047, SQSRequests: 0.34}},
	{name: "tp16-c", stages: []int{2000, 1}, slots: 16, rate: 249, over: true,
		m: Measured{DynamoRate: 1003, SQSRate: 275, DynamoLatency: msec(1.3), SQSLatency: msec(3.5), Cores: 2, IdleCores: 0.03,
			DynamoCPU: us(1332), SQSCPU: us(4038), RunnerCPU: us(724), MixDynamoRate: 403 * 2.06, MixSQSCPU: us(3649)},
		p: Profile{DynamoRequests: 2.17, DynamoReads: 0.048, SQSRequests: 0.34}},
	{name: "tp32", stages: []int{2000, 1}, slots: 32, rate: 314,
		m: Measured{DynamoRate: 896, SQSRate: 251, DynamoLatency: msec(1.3), SQSLatency: msec(4.0), Cores: 2, IdleCores: 0.03,
			DynamoCPU: us(1412), SQSCPU: us(4254), RunnerCPU: us(600), MixDynamoRate: 365 * 2.06, MixSQSCPU: us(4004)},
		p: Profile{DynamoRequests: 2.21, DynamoReads: 0.081, SQSRequests: 0.35}},
	{name: "tp64", stages: []int{2000, 1}, slots: 64, rate: 242,
		m: Measured{DynamoRate: 862, SQSRate: 209, DynamoLatency: msec(1.4), SQSLatency: msec(4.4), Cores: 2, IdleCores: 0.15,
			DynamoCPU: us(1755), SQSCPU: us(4427), RunnerCPU: us(807), MixDynamoRate: 359 * 2.05, MixSQSCPU: us(4301)},
		p: Profile{DynamoRequests: 2.77, DynamoReads: 0.359, SQSRequests: 0.38}},
	{name: "fullbench throughput", stages: []int{2000, 1}, slots: 16, rate: 258,
		m: Measured{DynamoRate: 762, SQSRate: 218, DynamoLatency: msec(1.6), SQSLatency: msec(4.8), Cores: 2, IdleCores: 0.04,
			DynamoCPU: us(1716), SQSCPU: us(5396), RunnerCPU: us(757), MixDynamoRate: 339 * 2.06, MixSQSCPU: us(5266)},
		p: Profile{DynamoRequests: 2.21, DynamoReads: 0.081, SQSRequests: 0.34}},
	{name: "fullbench load", stages: []int{100000}, slots: 32, rate: 325, queued: 51.8,
		m: Measured{DynamoRate: 774, SQSRate: 235, DynamoLatency: msec(1.5), SQSLatency: msec(4.2), Cores: 2, IdleCores: 0.03,
			DynamoCPU: us(1464), SQSCPU: us(4643), RunnerCPU: us(632), MixDynamoRate: 323 * 2.05, MixSQSCPU: us(4485)},
		p: Profile{DynamoRequests: 2.12, DynamoReads: 0.022, SQSRequests: 0.31}},
	{name: "tp16 d", stages: []int{2000, 1}, slots: 16, rate: 299, under: true,
		m: Measured{DynamoRate: 859, SQSRate: 247, DynamoLatency: msec(1.2), SQSLatency: msec(4.0), Cores: 1.72, IdleCores: 0.01,
			DynamoCPU: us(1689), SQSCPU: us(4695), RunnerCPU: us(613), MixDynamoRate: 644, MixSQSCPU: us(4899)},
		p: Profile{DynamoRequests: 2.20, DynamoReads: 0.080, SQSRequests: 0.34}},
	{name: "tp16 e", stages: []int{2000, 1}, slots: 16, rate: 289,
		m: Measured{DynamoRate: 812, SQSRate: 222, DynamoLatency: msec(1.4), SQSLatency: msec(3.3), Cores: 2, IdleCores: 0.03,
			DynamoCPU: us(1440), SQSCPU: us(4626), RunnerCPU: us(604), MixDynamoRate: 735, MixSQSCPU: us(3816)},
		p: Profile{DynamoRequests: 2.17, DynamoReads: 0.048, SQSRequests: 0.34}},
	{name: "load b", stages: []int{100000}, slots: 32, rate: 290, queued: 57.9,
		m: Measured{DynamoRate: 929, SQSRate: 248, DynamoLatency: msec(1.2), SQSLatency: msec(4.3), Cores: 1.75, IdleCores: 0.06,
			DynamoCPU: us(1453), SQSCPU: us(4862), RunnerCPU: us(695), MixDynamoRate: 695, MixSQSCPU: us(4407)},
		p: Profile{DynamoRequests: 2.14, DynamoReads: 0.033, SQSRequests: 0.31}},
	{name: "load c", stages: []int{100000}, slots: 32, rate: 326, queued: 51.4,
		m: Measured{DynamoRate: 996, SQSRate: 285, DynamoLatency: msec(1.5), SQSLatency: msec(4.4), Cores: 1.74, IdleCores: 0.07,
			DynamoCPU: us(1343), SQSCPU: us(4104), RunnerCPU: us(617), MixDynamoRate: 761, MixSQSCPU: us(3853)},
		p: Profile{DynamoRequests: 2.13, DynamoReads: 0.023, SQSRequests: 0.31}},
	{name: "tp16 f", stages: []int{2000, 1}, slots: 16, rate: 298,
		m: Measured{DynamoRate: 964, SQSRate: 298, DynamoLatency: msec(1.1), SQSLatency: msec(3.5), Cores: 1.48, IdleCores: 0.03,
			DynamoCPU: us(1493), SQSCPU: us(4020), RunnerCPU: us(578), MixDynamoRate: 724, MixSQSCPU: us(4491)},
		p: Profile{DynamoRequests: 2.20, DynamoReads: 0.080, SQSRequests: 0.34}},
	{name: "tp16 g", stages: []int{2000, 1}, slots: 16, rate: 252,
		m: Measured{DynamoRate: 764, SQSRate: 201, DynamoLatency: msec(1.7), SQSLatency: msec(10.4), Cores: 1.69, IdleCores: 0.04,
			DynamoCPU: us(1664), SQSCPU: us(5264), RunnerCPU: us(720), MixDynamoRate: 666, MixSQSCPU: us(4402)},
		p: Profile{DynamoRequests: 2.21, DynamoReads: 0.081, SQSRequests: 0.34}},
	// Batched claims and commits: DynamoDB's work in operations, a
	// batch's statements each (two throughput-only runs, then a full
	// bench in a slow stretch of the machine).
	{name: "batched tp16 a", stages: []int{2000, 1}, slots: 16, rate: 228,
		m: Measured{DynamoRate: 714, SQSRate: 123, DynamoLatency: msec(1.9), SQSLatency: msec(7.9), Cores: 2, IdleCores: 0.07,
			DynamoCPU: us(1840), SQSCPU: us(8797), RunnerCPU: us(534), MixDynamoRate: 549, MixSQSCPU: us(8221)},
		p: Profile{DynamoRequests: 2.14, DynamoReads: 0.018, SQSRequests: 0.32}},
	{name: "batched tp16 b", stages: []int{2000, 1}, slots: 16, rate: 214,
		m: Measured{DynamoRate: 768, SQSRate: 122, DynamoLatency: msec(2.9), SQSLatency: msec(8.6), Cores: 1.99, IdleCores: 0.03,
			DynamoCPU: us(1783), SQSCPU: us(9019), RunnerCPU: us(592), MixDynamoRate: 571, MixSQSCPU: us(8804)},
		p: Profile{DynamoRequests: 2.14, DynamoReads: 0.018, SQSRequests: 0.32}},
	{name: "batched fullbench throughput", stages: []int{2000, 1}, slots: 16, rate: 181,
		m: Measured{DynamoRate: 538, SQSRate: 101, DynamoLatency: msec(3.2), SQSLatency: msec(9.0), Cores: 1.92, IdleCores: 0.04,
			DynamoCPU: us(2082), SQSCPU: us(9872), RunnerCPU: us(708), MixDynamoRate: 446, MixSQSCPU: us(9355)},
		p: Profile{DynamoRequests: 2.14, DynamoReads: 0.018, SQSRequests: 0.32}},
	{name: "batched fullbench load", stages: []int{100000}, slots: 32, rate: 209, queued: 109.5,
		m: Measured{DynamoRate: 678, SQSRate: 115, DynamoLatency: msec(2.8), SQSLatency: msec(9.6), Cores: 1.97, IdleCores: 0.05,
			DynamoCPU: us(1985), SQSCPU: us(9368), RunnerCPU: us(683), MixDynamoRate: 471, MixSQSCPU: us(8978)},
		p: Profile{DynamoRequests: 2.18, DynamoReads: 0.069, SQSRequests: 0.32}},
	{name: "batched fullbench 2 load", stages: []int{100000}, slots: 32, rate: 234, queued: 97.3,
		m: Measured{DynamoRate: 980, SQSRate: 140, DynamoLatency: msec(1.7), SQSLatency: msec(8.0), Cores: 2, IdleCores: 0.07,
			DynamoCPU: us(1693), SQSCPU: us(9122), RunnerCPU: us(539), MixDynamoRate: 611, MixSQSCPU: us(8170)},
		p: Profile{DynamoRequests: 2.18, DynamoReads: 0.071, SQSRequests: 0.32}},
	{name: "batched load c", stages: []int{100000}, slots: 32, rate: 246, queued: 99.3, doneByQueued: 1972,
		m: Measured{DynamoRate: 941, SQSRate: 122, DynamoLatency: msec(1.6), SQSLatency: msec(8.0), Cores: 2, IdleCores: 0.06,
			DynamoCPU: us(1584), SQSCPU: us(8063), RunnerCPU: us(495), MixDynamoRate: 621, MixSQSCPU: us(7182)},
		p: Profile{DynamoRequests: 2.18, DynamoReads: 0.045, SQSRequests: 0.32}},
	{name: "batched load d", stages: []int{100000}, slots: 32, rate: 325, queued: 78.2, doneByQueued: 2073,
		m: Measured{DynamoRate: 1164, SQSRate: 191, DynamoLatency: msec(1.7), SQSLatency: msec(6.2), Cores: 2, IdleCores: 0.03,
			DynamoCPU: us(1177), SQSCPU: us(6168), RunnerCPU: us(364), MixDynamoRate: 908, MixSQSCPU: us(5763)},
		p: Profile{DynamoRequests: 2.18, DynamoReads: 0.022, SQSRequests: 0.32}},
	// A full bench whose probes split moto's price (SendShare measured).
	{name: "split fullbench throughput", stages: []int{2000, 1}, slots: 16, rate: 474,
		m: Measured{DynamoRate: 1800, SQSRate: 299, DynamoLatency: msec(1.0), SQSLatency: msec(3.3), Cores: 1.93, IdleCores: 0.01,
			DynamoCPU: us(773), SQSCPU: us(3595), RunnerCPU: us(202), MixDynamoRate: 1207, MixSQSCPU: us(3465), SendShare: 1.15},
		p: Profile{DynamoRequests: 2.12, DynamoReads: 0.015, SQSRequests: 0.32}},
	{name: "split fullbench load", stages: []int{100000}, slots: 32, rate: 509, queued: 42.5, doneByQueued: 2131,
		m: Measured{DynamoRate: 1753, SQSRate: 289, DynamoLatency: msec(1.0), SQSLatency: msec(3.4), Cores: 2, IdleCores: 0.01,
			DynamoCPU: us(733), SQSCPU: us(3783), RunnerCPU: us(190), MixDynamoRate: 1259, MixSQSCPU: us(3536), SendShare: 1.15},
		p: Profile{DynamoRequests: 2.09, DynamoReads: 0.017, SQSRequests: 0.31}},
	// Throughput-only runs on a slower machine, 32 and 16 slots in turn.
	{name: "slots 32 a", stages: []int{2000, 1}, slots: 32, rate: 238,
		m: Measured{DynamoRate: 594, SQSRate: 121, DynamoLatency: msec(2.9), SQSLatency: msec(8.3), Cores: 1.93, IdleCores: 0.09,
			DynamoCPU: us(1738), SQSCPU: us(7841), RunnerCPU: us(458), MixDynamoRate: 521, MixSQSCPU: us(7337), SendShare: 1.23},
		p: Profile{DynamoRequests: 2.13, DynamoReads: 0.018, SQSRequests: 0.32}},
	{name: "slots 16 a", stages: []int{2000, 1}, slots: 16, rate: 213,
		m: Measured{DynamoRate: 600, SQSRate: 149, DynamoLatency: msec(2.5), SQSLatency: msec(6.6), Cores: 1.94, IdleCores: 0.03,
			DynamoCPU: us(1871), SQSCPU: us(7564), RunnerCPU: us(540), MixDynamoRate: 499, MixSQSCPU: us(7625), SendShare: 1.02},
		p: Profile{DynamoRequests: 2.14, DynamoReads: 0.018, SQSRequests: 0.32}},
	{name: "slots 32 b", stages: []int{2000, 1}, slots: 32, rate: 280,
		m: Measured{DynamoRate: 706, SQSRate: 145, DynamoLatency: msec(2.2), SQSLatency: msec(7.0), Cores: 2, IdleCores: 0.05,
			DynamoCPU: us(1538), SQSCPU: us(6822), RunnerCPU: us(392), MixDynamoRate: 596, MixSQSCPU: us(6374), SendShare: 1.13},
		p: Profile{DynamoRequests: 2.13, DynamoReads: 0.016, SQSRequests: 0.31}},
	{name: "slots 16 b", stages: []int{2000, 1}, slots: 16, rate: 277,
		m: Measured{DynamoRate: 775, SQSRate: 175, DynamoLatency: msec(2.2), SQSLatency: msec(5.9), Cores: 2, IdleCores: 0.05,
			DynamoCPU: us(1542), SQSCPU: us(6039), RunnerCPU: us(427), MixDynamoRate: 645, MixSQSCPU: us(5878), SendShare: 1.12},
		p: Profile{DynamoRequests: 2.13, DynamoReads: 0.017, SQSRequests: 0.32}},
	// Full benches on that machine, the throughput job on 32 slots. The
	// first one's load job ran in a slower stretch than its probes: all
	// three processes spent a quarter more CPU a task over the job.
	{name: "32 fullbench throughput", stages: []int{2000, 1}, slots: 32, rate: 282,
		m: Measured{DynamoRate: 683, SQSRate: 156, DynamoLatency: msec(2.5), SQSLatency: msec(6.4), Cores: 1.98, IdleCores: 0.03,
			DynamoCPU: us(1557), SQSCPU: us(7023), RunnerCPU: us(375), MixDynamoRate: 593, MixSQSCPU: us(6706), SendShare: 1.10},
		p: Profile{DynamoRequests: 2.13, DynamoReads: 0.016, SQSRequests: 0.31}},
	{name: "32 fullbench load", stages: []int{100000}, slots: 32, rate: 241, over: true,
		m: Measured{DynamoRate: 767, SQSRate: 181, DynamoLatency: msec(2.2), SQSLatency: msec(5.3), Cores: 1.99, IdleCores: 0.02,
			DynamoCPU: us(1446), SQSCPU: us(6114), RunnerCPU: us(489), MixDynamoRate: 714, MixSQSCPU: us(5613), SendShare: 1.08},
		p: Profile{DynamoRequests: 2.17, DynamoReads: 0.064, SQSRequests: 0.32}},
	{name: "32 fullbench 2 throughput", stages: []int{2000, 1}, slots: 32, rate: 211,
		m: Measured{DynamoRate: 595, SQSRate: 152, DynamoLatency: msec(3.3), SQSLatency: msec(6.6), Cores: 1.79, IdleCores: 0.03,
			DynamoCPU: us(1519), SQSCPU: us(6999), RunnerCPU: us(465), MixDynamoRate: 565, MixSQSCPU: us(7252), SendShare: 1.16},
		p: Profile{DynamoRequests: 2.14, DynamoReads: 0.018, SQSRequests: 0.32}},
	{name: "32 fullbench 2 load", stages: []int{100000}, slots: 32, rate: 215, queued: 86.2, doneByQueued: 2061,
		m: Measured{DynamoRate: 570, SQSRate: 145, DynamoLatency: msec(2.8), SQSLatency: msec(7.0), Cores: 1.91, IdleCores: 0.06,
			DynamoCPU: us(1647), SQSCPU: us(7354), RunnerCPU: us(531), MixDynamoRate: 544, MixSQSCPU: us(7182), SendShare: 1.12},
		p: Profile{DynamoRequests: 2.18, DynamoReads: 0.068, SQSRequests: 0.32}},
	{name: "32 fullbench 3 throughput", stages: []int{2000, 1}, slots: 32, rate: 235,
		m: Measured{DynamoRate: 529, SQSRate: 125, DynamoLatency: msec(2.7), SQSLatency: msec(7.9), Cores: 1.75, IdleCores: 0.04,
			DynamoCPU: us(1676), SQSCPU: us(7963), RunnerCPU: us(454), MixDynamoRate: 534, MixSQSCPU: us(7875), SendShare: 1.13},
		p: Profile{DynamoRequests: 2.14, DynamoReads: 0.017, SQSRequests: 0.31}},
	{name: "32 fullbench 3 load", stages: []int{100000}, slots: 32, rate: 221, queued: 79.7, doneByQueued: 2068,
		m: Measured{DynamoRate: 678, SQSRate: 150, DynamoLatency: msec(2.5), SQSLatency: msec(6.8), Cores: 1.85, IdleCores: 0.04,
			DynamoCPU: us(1633), SQSCPU: us(7247), RunnerCPU: us(517), MixDynamoRate: 564, MixSQSCPU: us(6749), SendShare: 1.13},
		p: Profile{DynamoRequests: 2.17, DynamoReads: 0.064, SQSRequests: 0.32}},
}

// The simulator, fed each logged run's measured inputs, predicts its rate
// and its time to the last task queued within the bench's tolerance;
// a run whose machine was busier during the job than around it is
// predicted over it.
func TestEmulatorReplaysLoggedRuns(t *testing.T) {
	const tolerance = 0.15 // cmd/bench's simTolerance
	for _, c := range loggedRuns {
		t.Run(c.name, func(t *testing.T) {
			if c.m.SendShare == 0 {
				c.m.SendShare = loggedShare
			}
			r, err := Run(Emulator(c.stages, c.p, c.m, c.slots, 1))
			if err != nil {
				t.Fatal(err)
			}
			e := (r.Rate - c.rate) / c.rate
			t.Logf("rate predicted %.0f, measured %.0f: %+.1f%%; last task queued %.1fs, measured %.1fs, with %d tasks committed, measured %d",
				r.Rate, c.rate, 100*e, r.Queued.Seconds(), c.queued, r.DoneByQueued, c.doneByQueued)
			switch {
			case c.over && e <= tolerance:
				t.Errorf("rate %.0f: want over the measured %.0f by more than %.0f%%", r.Rate, c.rate, 100*tolerance)
			case c.under && e >= 0:
				t.Errorf("rate %.0f: want under the measured %.0f", r.Rate, c.rate)
			case !c.over && !c.under && math.Abs(e) > tolerance:
				t.Errorf("rate %.0f: %+.1f%% off the measured %.0f", r.Rate, 100*e, c.rate)
			}
			if q := r.Queued.Seconds(); c.queued > 0 && math.Abs(q-c.queued)/c.queued > tolerance {
				t.Errorf("last task queued %.1fs: %+.1f%% off the measured %.1fs", q, 100*(q-c.queued)/c.queued, c.queued)
			}
			if d, m := float64(r.DoneByQueued), float64(c.doneByQueued); m > 0 && math.Abs(d-m)/m > doneTolerance {
				t.Errorf("tasks committed by the last task queued %.0f: %+.1f%% off the measured %.0f", d, 100*(d-m)/m, m)
			}
		})
	}
}
