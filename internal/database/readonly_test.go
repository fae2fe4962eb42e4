package database_test

import (
	"context"
	"database/sql/driver"
	"errors"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/mysqlerr"
	"github.com/seckill/seckill/internal/testenv/mariadb"
)

// TestReadOnlyServerRetiresThePool: a primary demoted to read-only
// behind an address that moved keeps the pool's connections (and
// conn_max_life is minutes). The first write it refuses (1290) retires
// every connection opened so far, for GORM's statements and for the batch
// commit's raw ones alike: the next writes land on the new server. Two
// servers of its own, no replication needed.
func TestReadOnlyServerRetiresThePool(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	template, err := mariadb.Template(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	var servers []*mariadb.Server
	for i := range 2 {
		s, err := mariadb.Start(ctx, template, dir+"/s"+string(rune('a'+i)), i+1)
		if s != nil {
			t.Cleanup(s.Kill)
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Exec(ctx, "CREATE DATABASE t", "CREATE TABLE t.w (id INT AUTO_INCREMENT PRIMARY KEY, v INT)"); err != nil {
			t.Fatal(err)
		}
		servers = append(servers, s)
	}
	old, next := servers[0], servers[1]
	mover, err := mariadb.NewMover(old.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mover.Close)
	db, err := database.OpenMySQL(mariadb.AppDSN(mover.Addr, "t"), database.Options{MaxOpenConns: 8, MaxIdleConns: 8, ConnMaxLife: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { database.Close(db) })
	sqlDB, _ := db.DB()
	// Eight connections to the old server, idle in the pool.
	for range 2 {
		var conns []interface{ Close() error }
		for range 8 {
			c, err := sqlDB.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.ExecContext(ctx, "INSERT INTO w (v) VALUES (0)"); err != nil {
				t.Fatal(err)
			}
			conns = append(conns, c)
		}
		for _, c := range conns {
			c.Close()
		}
	}

	if err := old.Exec(ctx, "SET GLOBAL read_only = 1"); err != nil { // demoted
		t.Fatal(err)
	}
	mover.Move(next.Addr, false) // the address moves; the old connections stay

	writes := []struct {
		name string
		do   func() error
	}{
		{"gorm", func() error { return db.WithContext(ctx).Exec("INSERT INTO w (v) VALUES (1)").Error }},
		{"raw", func() error {
			c, err := sqlDB.Conn(ctx)
			if err != nil {
				return err
			}
			defer c.Close()
			return c.Raw(func(dc any) error {
				_, err := dc.(driver.ExecerContext).ExecContext(ctx, "INSERT INTO w (v) VALUES (2)", nil)
				return err
			})
		}},
	}
	refused, landed := 0, 0
	for round := range 5 {
		for _, w := range writes {
			err := w.do()
			var myErr *mysql.MySQLError
			switch {
			case err == nil:
				landed++
			case errors.As(err, &myErr) && myErr.Number == mysqlerr.ReadOnly:
				refused++
			default:
				t.Fatalf("round %d, %s write: %v", round, w.name, err)
			}
		}
	}
	if refused > 1 {
		t.Errorf("%d writes refused as read-only; want at most 1: the first refusal retires the pool", refused)
	}
	var onNew, onOld int
	if err := next.Query(ctx, "SELECT COUNT(*) FROM t.w", &onNew); err != nil {
		t.Fatal(err)
	}
	if err := old.Query(ctx, "SELECT COUNT(*) FROM t.w WHERE v > 0", &onOld); err != nil {
		t.Fatal(err)
	}
	if onNew != landed || onOld != 0 {
		t.Errorf("%d writes landed: %d on the new server, %d on the read-only one; want all on the new", landed, onNew, onOld)
	}
}
