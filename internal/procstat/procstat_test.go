package procstat_test

import (
	"os"
	"testing"

	"github.com/seckill/seckill/internal/procstat"
)

func TestParseStat(t *testing.T) {
	t.Parallel()
	// A command name with spaces and parentheses: fields count after the last ')'.
	line := "4242 (my (odd) name) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 9 0 1000 1 1 18446744073709551615\n"
	got, err := procstat.ParseStat(line)
	if err != nil {
		t.Fatal(err)
	}
	if want := 325 * procstat.ClockTick; got != want {
		t.Errorf("ParseStat = %v; want %v (utime 250 + stime 75 ticks)", got, want)
	}
	for _, bad := range []string{"", "12 (x) S 1 2", "12 (x) S 1 2 3 4 5 6 7 8 9 10 ten 12"} {
		if _, err := procstat.ParseStat(bad); err == nil {
			t.Errorf("ParseStat(%q) = nil error; want one", bad)
		}
	}
}

func TestSelf(t *testing.T) {
	t.Parallel()
	if _, err := procstat.CPU(procstat.Self); err != nil {
		t.Errorf("CPU(Self): %v", err)
	}
	self, err := procstat.RSS(procstat.Self)
	if err != nil || self <= 0 {
		t.Errorf("RSS(Self) = %d, %v; want a positive size", self, err)
	}
	byPID, err := procstat.RSS(os.Getpid())
	if err != nil || byPID <= 0 {
		t.Errorf("RSS(own pid) = %d, %v; want a positive size", byPID, err)
	}
	if _, err := procstat.RSS(-1); err == nil {
		t.Error("RSS(-1) = nil error; want one")
	}
}
