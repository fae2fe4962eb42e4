package repository_test

import (
	"context"
	"testing"

	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/repository"
	"github.com/seckill/seckill/service"
)

// anyReplicas confirms every commit: the store then tracks positions.
type anyReplicas struct{}

func (anyReplicas) Confirm(context.Context, service.Commit) error { return nil }

// TestCommitBatch_OneByOneKeepsItsPosition (issue 46 a): a batch the
// database refuses a row of is committed request by request (commitEach);
// its result still carries where it committed, so that with
// mysql.min_replicas the replicas can confirm it instead of every buyer
// of the batch, those whose orders committed included, being told
// outcome_unknown.
func TestCommitBatch_OneByOneKeepsItsPosition(t *testing.T) {
	t.Parallel()
	dsn := testenv.Database(t)
	db := testenv.DB(t, dsn)
	skuID, res, err := commitBehindAStaleRead(t, dsn, repository.NewMySQL(db, repository.WithReplicas(anyReplicas{})))
	checkBigAnswers(t, db, skuID, res, err)
	var binlog bool
	if err := db.Raw("SELECT @@log_bin").Scan(&binlog).Error; err != nil {
		t.Fatal(err)
	}
	if res.Commit.Server == 0 || binlog && res.Commit.GTIDs == "" {
		t.Errorf("Commit of a batch committed one by one = %+v; want the server and its position (binary log on: %v)", res.Commit, binlog)
	}
}
