package dynamo

import (
	"context"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	sm "github.com/batchwork/batchwork/statemachine"
)

// A counted job's charge grows after submit: an input stage is charged
// one task at submit and the rest of its plan once planned
// (ChargeStagePlan), and a dynamic split charges the tasks it adds
// (SplitTask). Each growth adds to the job's own count (qn, which EndJob
// gives back) and to the owner's counter in one transaction, under the
// job being RUNNING: a job that ended gave its count back already, and
// EndJob holds its release to the count it read (endQuotaCond), so the
// two never pass each other.

// aQuotaPlanned marks on a job item that stage <n>'s plan was charged
// (qp<n>), so a repeated materialization charges it once.
const aQuotaPlanned = "qp"

// PlanChargeParams charges a stage's plan to its job's owner.
type PlanChargeParams struct {
	Job   string
	Stage int
	// Tasks is what the plan adds to the job's count (negative when the
	// plan is smaller than what submit counted); MaxTasks is the owner's
	// tasks quota now (0: no limit).
	Tasks, MaxTasks int
}

// ChargeStagePlan adds p.Tasks to a counted job's count and its owner's
// tasks counter, once per stage. It returns ErrQuotaReached, writing
// nothing, when the owner's counter would pass p.MaxTasks. A job that is
// not counted, has ended, or whose stage was charged already, is left
// alone.
func (s *Store) StageChargePlan(ctx context.Context, p PlanChargeParams) error {
	head, err := s.jobHead(ctx, p.Job)
	if err != nil {
		return fmt.Errorf("charge the plan of stage %s/%d: %w", p.Job, p.Stage, err)
	}
	if !head.Quota || p.Tasks == 0 {
		return nil
	}
	job := jobQuotaAdd(s.table, p.Job, p.Tasks)
	job.Update.ConditionExpression = aws.String(*job.Update.ConditionExpression + " AND attribute_not_exists(#qp)")
	job.Update.ExpressionAttributeNames["#qp"] = aQuotaPlanned + strconv.Itoa(p.Stage)
	job.Update.UpdateExpression = aws.String(*job.Update.UpdateExpression + " SET #qp = :t")
	job.Update.ExpressionAttributeValues[":t"] = bv(true)
	err = s.transact(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		job, quotaUpdate(s.table, head.Owner, quotaTasks, p.Tasks, p.MaxTasks),
	}})
	reasons := cancelReasons(err)
	switch {
	case err == nil:
		return nil
	case len(reasons) == 2 && reasons[0] == reasonCondFailed:
		return nil // charged already (a repeat, or a lost answer's retry), or the job ended
	case len(reasons) == 2 && reasons[1] == reasonCondFailed:
		return fmt.Errorf("charge the plan of stage %s/%d: %w", p.Job, p.Stage, ErrQuotaReached)
	}
	return fmt.Errorf("charge the plan of stage %s/%d: %w", p.Job, p.Stage, err)
}

// jobQuotaAdd adds n to a RUNNING job's count of tasks.
func jobQuotaAdd(table, job string, n int) types.TransactWriteItem {
	return types.TransactWriteItem{Update: &types.Update{
		TableName: &table, Key: key(jobPK(job), jobSK),
		UpdateExpression:          aws.String("ADD #qn :n"),
		ConditionExpression:       aws.String("#st = :run AND attribute_exists(#qn)"),
		ExpressionAttributeNames:  map[string]string{"#st": aState, "#qn": aQuotaTasks},
		ExpressionAttributeValues: map[string]types.AttributeValue{":run": sv(string(sm.JobRunning)), ":n": nv(int64(n))},
	}}
}

// endQuotaCond holds a job's end to the count it gives back: a charge
// that landed after EndJob read the count fails the end's condition, and
// EndJob reads again (endQuotaTries).
func endQuotaCond(c *cond, names map[string]string, qn int) string {
	names["#qn"] = aQuotaTasks
	c.values[":qn"] = nv(int64(qn))
	return " AND #qn = :qn"
}

// endQuotaTries is how many times EndJob reads again at once a count that
// charges keep moving; past them it backs off between tries (each charge
// is one stage's plan or one split, so a few usually suffice).
const endQuotaTries = 8
