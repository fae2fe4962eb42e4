package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/seckill/seckill/internal/procstat"
)

// boxCPU is the CPU time the whole machine has spent busy (every state
// but idle and iowait, all CPUs), from the first line of /proc/stat.
func boxCPU() (time.Duration, error) {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	return parseBoxStat(string(raw))
}

func parseBoxStat(stat string) (time.Duration, error) {
	first, _, _ := strings.Cut(stat, "\n")
	f := strings.Fields(first)
	if len(f) < 8 || f[0] != "cpu" {
		return 0, errors.New("bench: /proc/stat has no cpu line")
	}
	var busy int64
	for i, v := range f[1:] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		if i >= 8 { // guest times are already counted in user
			break
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("bench: /proc/stat: %w", err)
		}
		busy += n
	}
	return time.Duration(busy) * procstat.ClockTick, nil
}

// mariadbPID finds the MariaDB server behind admin: its pid file, else
// the one process named mariadbd (or mysqld). The server is shared, so
// its counter also counts whatever else runs on it (see otherLoad).
func mariadbPID(ctx context.Context, admin *sql.DB) (int, error) {
	var file string
	if err := admin.QueryRowContext(ctx, "SELECT @@pid_file").Scan(&file); err == nil {
		if raw, err := os.ReadFile(file); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(raw))); err == nil {
				return pid, nil
			}
		}
	}
	return procstat.MariaDB()
}

// cpuSample is the CPU counters of one moment: the service, MariaDB, the
// benchmark's Redis, -events' broker and the whole machine.
type cpuSample struct {
	svc, db, redis, broker, box time.Duration
}

// sampleCPU reads the counters; a process whose counter cannot be read
// (MariaDB elsewhere) counts zero, and the table says n/a for it.
func sampleCPU(svc, db, redis, broker int) cpuSample {
	read := func(pid int) time.Duration {
		if pid <= 0 {
			return 0
		}
		d, _ := procstat.CPU(pid)
		return d
	}
	box, _ := boxCPU()
	return cpuSample{svc: read(svc), db: read(db), redis: read(redis), broker: read(broker), box: box}
}

// cpuCost is what one row cost in CPU, per answered request (µs), and
// how busy the machine was with it.
type cpuCost struct {
	SvcUS   float64 `json:"service_cpu_us_per_req"`
	DBUS    float64 `json:"mariadb_cpu_us_per_req"`
	RedisUS float64 `json:"redis_cpu_us_per_req"`
	// BrokerUS is -events' nats-server: the relay's publications stored.
	BrokerUS float64 `json:"broker_cpu_us_per_req,omitempty"`
	// K6Share is the load generator's part of the machine's busy CPU.
	K6Share float64 `json:"k6_share_of_busy_cpu"`
	// OtherCores is the CPU, in cores, used by processes that are none of
	// the above during the row: other work on a shared machine.
	OtherCores float64 `json:"other_load_cores"`
}

// Total is the order path's CPU per request: service, MariaDB, Redis and
// the events' broker.
func (c cpuCost) Total() float64 { return c.SvcUS + c.DBUS + c.RedisUS + c.BrokerUS }

// costOf divides the counters' growth between before and after by the
// requests answered; k6 is the load generator's own CPU over the row.
func costOf(before, after cpuSample, k6 time.Duration, wall time.Duration, requests int64) cpuCost {
	if requests <= 0 {
		return cpuCost{}
	}
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(requests) }
	c := cpuCost{
		SvcUS:    per(after.svc - before.svc),
		DBUS:     per(after.db - before.db),
		RedisUS:  per(after.redis - before.redis),
		BrokerUS: per(after.broker - before.broker),
	}
	busy := after.box - before.box
	if busy > 0 {
		c.K6Share = float64(k6) / float64(busy)
	}
	ours := (after.svc - before.svc) + (after.db - before.db) + (after.redis - before.redis) + (after.broker - before.broker) + k6
	if wall > 0 && busy > ours {
		c.OtherCores = float64(busy-ours) / float64(wall)
	}
	return c
}

// loadAverage is the first figure of /proc/loadavg (the box's 1-minute load).
func loadAverage() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(raw))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
