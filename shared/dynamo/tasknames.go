package dynamo

import (
	"context"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The task catalog: the task names executors can run, so that a spec
// naming a task no executor has is rejected at submit instead of failing
// every attempt. One item (taskNamesPK) holds them as a string set. Each
// executor ADDs its names once when it starts, which is idempotent (a
// set) and needs no read; submitters read the item and cache it for a few
// seconds, so the one key is never hot.
//
// Names are never removed: a task an older executor version had stays
// known. The same item holds the exec programs that executors with a
// programs directory published (attribute programs), likewise. A 400 KB item holds thousands of 64-byte names, far more than
// any deployment registers.

// The item's attributes: the task names, and the exec programs the
// executors that run programs found in their programs directories
// (published the same way, checked the same way at submit).
const (
	aNames    = "names"
	aPrograms = "programs"
)

// AddTaskNames adds names to the task catalog. An empty list writes
// nothing (an empty string set is not a DynamoDB value).
func (s *Store) CatalogAddTaskNames(ctx context.Context, names []string) error {
	return s.addToCatalog(ctx, aNames, "task names", names)
}

// AddPrograms adds exec programs' names to the catalog, beside the task
// names. An empty list writes nothing.
func (s *Store) CatalogAddPrograms(ctx context.Context, names []string) error {
	return s.addToCatalog(ctx, aPrograms, "programs", names)
}

func (s *Store) addToCatalog(ctx context.Context, attr, what string, names []string) error {
	if len(names) == 0 {
		return nil
	}
	set := slices.Clone(names)
	slices.Sort(set)
	set = slices.Compact(set) // a set value must not repeat a member
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: key(taskNamesPK, taskNamesSK),
		UpdateExpression:          aws.String("ADD #n :n"),
		ExpressionAttributeNames:  map[string]string{"#n": attr},
		ExpressionAttributeValues: map[string]types.AttributeValue{":n": &types.AttributeValueMemberSS{Value: set}},
	})
	if err != nil {
		return fmt.Errorf("publish %d %s: %w", len(set), what, err)
	}
	return nil
}

// TaskNames reads the task catalog, sorted; empty when no executor has
// published yet. The read is strongly consistent: a submitter reads it
// again on a miss precisely to see names published a moment ago.
func (s *Store) CatalogTaskNames(ctx context.Context) ([]string, error) {
	return s.readCatalog(ctx, aNames, "task names")
}

// Programs reads the exec programs published, sorted, as TaskNames does
// the task names.
func (s *Store) CatalogPrograms(ctx context.Context) ([]string, error) {
	return s.readCatalog(ctx, aPrograms, "programs")
}

func (s *Store) readCatalog(ctx context.Context, attr, what string) ([]string, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.table, Key: key(taskNamesPK, taskNamesSK), ConsistentRead: aws.Bool(true),
		ProjectionExpression:     aws.String("#n"),
		ExpressionAttributeNames: map[string]string{"#n": attr},
	})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	ss, _ := out.Item[attr].(*types.AttributeValueMemberSS)
	if ss == nil {
		return nil, nil
	}
	names := slices.Clone(ss.Value)
	slices.Sort(names)
	return names, nil
}
