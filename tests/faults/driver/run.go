package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// run performs run i of category c with plan p and adds up what it found.
func (s *suite) run(i int, c category, p plan) {
	cnt := s.category(c.name)
	state := filepath.Join(s.bin, fmt.Sprintf("run-%d.state", i))
	_ = os.Remove(state)
	defer os.Remove(state)
	out := &syncBuffer{}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(s.bound+30)*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", s.clusterArgs(c, p, state)...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	start := time.Now()
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(out, "driver: start cluster.sh: %v\n", err)
	}
	nodes := s.watch(c, p, state, out, cmd)
	err := cmd.Wait()
	took := time.Since(start)
	f := judgeLog(out.String(), c, p)
	s.mu.Lock()
	for _, m := range pidRe.FindAllStringSubmatch(out.String(), -1) {
		pid, _ := strconv.ParseUint(m[1], 10, 64)
		s.pids[pid] = true
	}
	s.mu.Unlock()
	if ctx.Err() != nil {
		f.hang = true
		fmt.Fprintf(out, "driver: cluster.sh still running after %d s: killed\n", s.bound+30)
	}
	for k, d := range nodes {
		names, _ := d.Readdirnames(-1)
		d.Close()
		for _, n := range names {
			fmt.Fprintf(out, "driver: left in node %d's /dev/shm: %s\n", k, n)
		}
		f.litter += len(names)
	}
	if err != nil && f.summary == "" && !f.hang {
		f.other++
		fmt.Fprintf(out, "driver: cluster.sh: %v and no launch summary\n", err)
	}
	s.mu.Lock()
	cnt.runs++
	cnt.add(f)
	s.mu.Unlock()
	bad := f.failed()
	if bad || s.keep {
		log := filepath.Join(s.logs, fmt.Sprintf("run-%03d-%s.log", i, c.name))
		_ = os.WriteFile(log, out.Bytes(), 0o644)
	}
	if (bad || s.verbose) && !s.quiet {
		verdict := "ok"
		if bad {
			verdict = fmt.Sprintf("FAIL %s (log %s; replay: %s%d)", f, filepath.Join(s.logs, fmt.Sprintf("run-%03d-%s.log", i, c.name)), replay, i)
		}
		fmt.Printf("run %d %s %s: %s (%.1f s)\n", i, c.name, p, verdict, took.Seconds())
	}
}

// category returns c's tallies, made on first use.
func (s *suite) category(name string) *counts {
	s.mu.Lock()
	defer s.mu.Unlock()
	cnt := s.counts[name]
	if cnt == nil {
		cnt = &counts{}
		s.counts[name] = cnt
	}
	return cnt
}

func (s *suite) clusterArgs(c category, p plan, state string) []string {
	root, _ := filepath.Abs(filepath.Join(filepath.Dir(os.Args[0]), "..", ".."))
	if r := os.Getenv("FAULTS_ROOT"); r != "" {
		root = r
	}
	args := []string{filepath.Join(root, "tests/multinode/cluster.sh"), "--launch", filepath.Join(s.bin, "launch"),
		"--state", state, "-t", strconv.Itoa(s.bound), "-k", strconv.Itoa(c.nodes), "-n", strconv.Itoa(c.ranks),
		"-e", "MSCCLPP_TEST_TRANSPORT=" + c.transport}
	if c.transport == "ib" {
		args = append(args, "-e", "MSCCLPP_TEST_IB_DEV=double_0", "-e",
			"MSCCLPP_IBV_SO="+filepath.Join(s.bin, "ibdouble/libibverbs.so.1"), "-e", "MSCCLPP_IBV_DOUBLE_DIR={DIR}")
	}
	action, victim := c.action, p.victim
	if strings.HasPrefix(action, "link") {
		action, victim = "none", -1
	}
	return append(args, "--", filepath.Join(s.bin, "fault_rank"), p.phase, action, strconv.Itoa(victim),
		strconv.FormatInt(p.delayUs, 10), strconv.FormatInt(p.holdMs, 10), strconv.Itoa(p.rounds), strconv.Itoa(p.chunk), strconv.Itoa(c.waitMs))
}

// watch waits for the cluster's state file, opens every node's /dev/shm (the
// descriptor keeps the node's tmpfs readable after the node is gone) and, for
// a link fault, takes the victim node's link down (and up again).
func (s *suite) watch(c category, p plan, state string, out *syncBuffer, cmd *exec.Cmd) []*os.File {
	var holders []string
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) && cmd.ProcessState == nil {
		if b, err := os.ReadFile(state); err == nil {
			for _, l := range strings.Split(string(b), "\n") {
				if f := strings.Fields(l); len(f) > 2 && f[0] == "pids" {
					holders = f[2:] // after the switch
				}
			}
			if len(holders) == c.nodes {
				break
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(holders) != c.nodes {
		fmt.Fprintf(out, "driver: no state file from cluster.sh\n")
		return nil
	}
	var dirs []*os.File
	for k, h := range holders {
		d, err := os.Open("/proc/" + h + "/root/dev/shm")
		if err != nil {
			fmt.Fprintf(out, "driver: node %d's /dev/shm: %v\n", k, err)
			continue
		}
		dirs = append(dirs, d)
	}
	if c.plant {
		b, err := exec.Command("nsenter", "-t", holders[0], "-m", "touch", "/dev/shm/mscclpp-faults-selftest").CombinedOutput()
		fmt.Fprintf(out, "driver: self-test: planted /dev/shm/mscclpp-faults-selftest in node 0: %v %s\n", err, b)
	}
	if strings.HasPrefix(c.action, "link") {
		time.Sleep(time.Duration(p.delayUs) * time.Microsecond)
		link(out, holders[p.victim], "down")
		if c.action == "linkflap" {
			time.Sleep(time.Duration(p.holdMs) * time.Millisecond)
			link(out, holders[p.victim], "up")
		}
	}
	return dirs
}

func link(out *syncBuffer, holder, how string) {
	b, err := exec.Command("nsenter", "-t", holder, "-n", "ip", "link", "set", "eth0", how).CombinedOutput()
	fmt.Fprintf(out, "driver: %s: link eth0 of node (holder %s) %s: %v %s\n", time.Now().Format("15:04:05.000"), holder,
		how, err, b)
}

// syncBuffer: the run's log, written by cluster.sh's output and the driver.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]byte(nil), s.b.Bytes()...)
}

func (s *syncBuffer) String() string { return string(s.Bytes()) }

// findings of one run.
type findings struct {
	summary                                        string
	hang                                           bool
	crashes, wrongBytes, wrongCodes, litter, other int
	errored, fired                                 bool
	unnamed                                        int // RemoteErrors that do not name the rank hurt (noted only)
}

func (f findings) failed() bool {
	return f.hang || f.crashes+f.wrongBytes+f.wrongCodes+f.litter+f.other > 0
}

func (f findings) String() string {
	return fmt.Sprintf("hang=%v crashes=%d wrong-bytes=%d wrong-codes=%d litter=%d other=%d", f.hang, f.crashes,
		f.wrongBytes, f.wrongCodes, f.litter, f.other)
}

func (c *counts) add(f findings) {
	if f.hang {
		c.hangs++
	}
	c.crashes += f.crashes
	c.wrongBytes += f.wrongBytes
	c.wrongCodes += f.wrongCodes
	c.litter += f.litter
	c.other += f.other
	if f.errored {
		c.errored++
	}
	if f.fired {
		c.fired++
	}
	c.unnamed += f.unnamed
}

// erroredRe: a call that failed (fault_rank's judge line)
var erroredRe = regexp.MustCompile(`FAULT rank \d+: (mscclpp\w+|putWithSignal|wait): `)

var pidRe = regexp.MustCompile(`FAULT rank \d+: pid (\d+)`)

var rankRe = regexp.MustCompile(`rank (\d+): (exit (\d+)|killed by signal (\d+)|did not exit)`)

// judgeLog reads launch's output: its TIMEOUT line and its summary of how
// every rank ended.
func judgeLog(log string, c category, p plan) findings {
	var f findings
	f.hang = strings.Contains(log, "launch: TIMEOUT")
	f.unnamed = strings.Count(log, " UNNAMED: ")
	f.fired = strings.Contains(log, " now (phase ") || strings.Contains(log, " down: <nil>")
	f.errored = erroredRe.MatchString(log)
	for _, l := range strings.Split(log, "\n") {
		if strings.HasPrefix(l, "launch: ") && strings.Contains(l, "; rank 0: ") {
			f.summary = l
		}
	}
	if f.summary == "" || f.hang {
		return f
	}
	sent := c.action == "kill" || c.action == "stop"
	for _, m := range rankRe.FindAllStringSubmatch(f.summary, -1) {
		r, _ := strconv.Atoi(m[1])
		switch {
		case m[4] != "":
			if sig, _ := strconv.Atoi(m[4]); !(sig == 9 && sent && r == p.victim) {
				f.crashes++
			}
		case m[3] == "0":
		case m[3] == "3":
			f.wrongBytes++
		case m[3] == "4":
			f.wrongCodes++
		default:
			f.other++
		}
	}
	return f
}
