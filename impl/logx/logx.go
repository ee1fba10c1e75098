// Package logx is the library's env-driven logger, the analogue of NCCL's
// debug.cc under the MSCCLPP_ names of the spec (API.md section 3).
//
// Configuration is read once, lazily, on first use (the first log line or
// level check, which the library makes at its first API call), through the C
// library's getenv (package env): a variable the application sets with
// setenv after loading the library and before its first call counts.
//
//   - MSCCLPP_DEBUG: VERSION, WARN, INFO, ABORT or TRACE (case-insensitive);
//     unset means no logging, and so does an unknown value, with a Malformed
//     warning.
//   - MSCCLPP_DEBUG_SUBSYS: comma list of INIT, COLL, P2P, SHM, NET, GRAPH,
//     TUNING, ENV, ALLOC, CALL, ALL (case-insensitive); a leading '^' inverts
//     the mask; unknown names are ignored with a Malformed warning; unset
//     means INIT. GRAPH and TUNING are accepted as upstream accepts them;
//     nothing logs under them (there is no graph search and no tuner).
//   - MSCCLPP_DEBUG_FILE: path of the debug stream, with %h replaced by the
//     short host name, %p by the pid and %% by a percent sign. It is opened
//     (append, create with mode 0600, O_NOFOLLOW) only when logging is on;
//     if it cannot be opened the stream stays stdout. A symbolic link or an
//     existing file of another user (root excepted) is refused with a WARN
//     on stderr, and the stream is stderr.
//
// Once loaded, the three variables are logged at INFO under ENV ("X set by
// environment to Y"), like every variable read through package env, whose
// reporter this package is.
//
// Lines handed to the handler end with "\n" and have these shapes:
//
//	host:pid:tid [dev] MSCCLPP INFO <msg>
//	host:pid:tid [dev] file:line MSCCLPP WARN <msg>
//	host:pid:tid [dev] <ms since init> func:line MSCCLPP TRACE <msg>
//	host:pid:tid [dev] MSCCLPP <msg>               (VERSION)
//
// Every function is safe for concurrent use.
package logx

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mscclpp-go/mscclpp/impl/env"
)

// Level is a logging level; a level is enabled when it is not LevelNone and
// not above the level set by MSCCLPP_DEBUG.
type Level int32

// The levels, in NCCL's order.
const (
	LevelNone Level = iota
	LevelVersion
	LevelWarn
	LevelInfo
	LevelAbort
	LevelTrace
)

var levelNames = [...]string{"NONE", "VERSION", "WARN", "INFO", "ABORT", "TRACE"}

// String returns the MSCCLPP_DEBUG spelling of l.
func (l Level) String() string {
	if l >= 0 && int(l) < len(levelNames) {
		return levelNames[l]
	}
	return "Level(" + strconv.Itoa(int(l)) + ")"
}

// Subsys is a bit set of subsystems, as selected by MSCCLPP_DEBUG_SUBSYS.
type Subsys uint32

// The subsystems (NCCL's bit values); All is every bit.
const (
	Init Subsys = 1 << iota
	Coll
	P2P
	SHM
	Net
	Graph
	Tuning
	Env
	Alloc
	Call
	All Subsys = ^Subsys(0)
)

var subsysNames = map[string]Subsys{
	"INIT": Init, "COLL": Coll, "P2P": P2P, "SHM": SHM, "NET": Net,
	"GRAPH": Graph, "TUNING": Tuning, "ENV": Env, "ALLOC": Alloc,
	"CALL": Call, "ALL": All,
}

// config is what the environment says, read once per Reset.
type config struct {
	level Level
	mask  Subsys
	file  *os.File // nil: stdout, looked up at write time
	// unknown lists the names in MSCCLPP_DEBUG_SUBSYS that are no subsystem.
	unknown []string
	// badLevel is a MSCCLPP_DEBUG value that is no level ("" when it is one or unset).
	badLevel string
	host     string
	pid      int
	epoch    time.Time
}

// holder makes the sync.Once resettable: Reset swaps in a fresh holder.
type holder struct {
	once     sync.Once
	cfg      *config
	reported atomic.Bool // the ENV lines of the logging variables were logged
}

var (
	current atomic.Pointer[holder]
	handler atomic.Pointer[func(string)]
	device  atomic.Int32
	writeMu sync.Mutex // keeps lines from the default handler whole
)

func init() {
	current.Store(new(holder))
	device.Store(-1)
	env.SetReporter(func(name, value string) {
		Infof(Env, "%s set by environment to %s", name, value)
	})
}

// The variables of the logger itself, read with Raw by load and
// reported once the configuration is in place.
var logVars = [...]env.Var{env.Debug, env.DebugSubsys, env.DebugFile}

func get() *config {
	for {
		h := current.Load()
		h.once.Do(func() { h.cfg = load() })
		if h.cfg != nil {
			if !h.reported.Load() && h.reported.CompareAndSwap(false, true) {
				reportLogVars(h.cfg)
			}
			return h.cfg
		}
		// a concurrent Reset retired h before anyone loaded it: use its successor
	}
}

// reportLogVars logs "X set by environment to Y" for the logger's variables,
// and warns about unknown subsystem names.
func reportLogVars(c *config) {
	for _, v := range logVars {
		if s, ok := v.Raw(); ok && s != "" {
			v.Report(s)
		}
	}
	if c.badLevel != "" {
		Malformed("ignoring MSCCLPP_DEBUG=%q: not VERSION, WARN, INFO, ABORT or TRACE; logging stays off", c.badLevel)
	}
	for _, name := range c.unknown {
		Malformed("MSCCLPP_DEBUG_SUBSYS: unknown subsystem %q ignored (known: INIT, COLL, P2P, SHM, NET, GRAPH, TUNING, ENV, ALLOC, CALL, ALL)", name)
	}
}

func load() *config {
	level, _ := env.Debug.Raw()
	c := &config{
		level: parseLevel(level),
		mask:  Init,
		host:  shortHost(),
		pid:   os.Getpid(),
		epoch: time.Now(),
	}
	if c.level == LevelNone && strings.TrimSpace(level) != "" {
		c.badLevel = level
	}
	if s, ok := env.DebugSubsys.Raw(); ok {
		c.mask, c.unknown = parseSubsys(s)
	}
	if name, _ := env.DebugFile.Raw(); name != "" && c.level != LevelNone {
		path := expandPath(name, c.host, c.pid)
		f, refused := openDebugFile(path)
		switch {
		case refused != "":
			// Someone else's file or a link: the log might go where another
			// user reads it. Say so on stderr, and log there.
			msg := "refusing MSCCLPP_DEBUG_FILE " + path + ": " + refused + "; logging to stderr instead"
			os.Stderr.WriteString(prefix(c) + "MSCCLPP WARN " + msg + "\n")
			c.file = os.Stderr
		case f != nil:
			c.file = f
		}
	}
	return c
}

// openDebugFile opens path for appending (created 0600), never through a
// symbolic link and never when it is an existing file of another user
// (root's files, such as /dev/null, are accepted). refused says why a file
// that exists was refused; (nil, "") means it could not be opened at all.
func openDebugFile(path string) (f *os.File, refused string) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_NOCTTY|syscall.O_NONBLOCK, 0o600)
	if err != nil {
		if fi, lerr := os.Lstat(path); lerr == nil && fi.Mode()&os.ModeSymlink != 0 {
			return nil, "it is a symbolic link"
		}
		return nil, ""
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, ""
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() && st.Uid != 0 {
		f.Close()
		return nil, "it belongs to uid " + strconv.Itoa(int(st.Uid)) + ", not to this user (uid " + strconv.Itoa(os.Geteuid()) + ")"
	}
	return f, ""
}

func parseLevel(s string) Level {
	for l := LevelVersion; l <= LevelTrace; l++ {
		if strings.EqualFold(s, levelNames[l]) {
			return l
		}
	}
	return LevelNone
}

// parseSubsys returns the mask of a MSCCLPP_DEBUG_SUBSYS value and the names
// in it that are no subsystem (ignored, and warned about).
func parseSubsys(s string) (Subsys, []string) {
	invert := strings.HasPrefix(s, "^")
	if invert {
		s = s[1:]
	}
	var m Subsys
	var unknown []string
	for _, name := range strings.Split(s, ",") {
		name = strings.ToUpper(strings.TrimSpace(name))
		bit, ok := subsysNames[name]
		if !ok && name != "" {
			unknown = append(unknown, name)
		}
		m |= bit
	}
	if invert {
		m = ^m
	}
	return m, unknown
}

// expandPath replaces %h, %p and %% in name; any other '%' is kept as is.
func expandPath(name, host string, pid int) string {
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		if name[i] != '%' || i+1 == len(name) {
			b.WriteByte(name[i])
			continue
		}
		i++
		switch name[i] {
		case '%':
			b.WriteByte('%')
		case 'h':
			b.WriteString(host)
		case 'p':
			b.WriteString(strconv.Itoa(pid))
		default:
			b.WriteByte('%')
			b.WriteByte(name[i])
		}
	}
	return b.String()
}

func shortHost() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "unknown"
	}
	if i := strings.IndexByte(h, '.'); i > 0 {
		h = h[:i]
	}
	return h
}

// Reset forgets the configuration and the last warning, so the environment
// is read again on next use; a debug file it had opened is closed. For tests.
func Reset() {
	old := current.Swap(new(holder))
	old.once.Do(func() {}) // settles old.cfg whether or not it was loaded
	if old.cfg != nil && old.cfg.file != nil && old.cfg.file != os.Stderr {
		writeMu.Lock()
		old.cfg.file.Close()
		writeMu.Unlock()
	}
	malformedSeen.Clear()
	env.Forget()
}

// Enabled reports whether a line at level for sub would be emitted. Levels up
// to LevelWarn ignore sub: VERSION and WARN lines are not subject to the mask.
func Enabled(level Level, sub Subsys) bool {
	c := get()
	if level == LevelNone || level > c.level {
		return false
	}
	return level <= LevelWarn || sub&c.mask != 0
}

// SetDevice sets the device shown as [dev] in every line; -1 (the default)
// means host mode.
func SetDevice(dev int) { device.Store(int32(dev)) }

// SetHandler sends every line to h instead of the debug stream; nil restores
// DefaultHandler. h may log again: no logx lock is held while it runs.
func SetHandler(h func(line string)) {
	if h == nil {
		handler.Store(nil)
		return
	}
	handler.Store(&h)
}

// DefaultHandler writes line, unchanged and in one piece, to the debug
// stream: the MSCCLPP_DEBUG_FILE file if one is open, else stdout.
func DefaultHandler(line string) {
	c := get()
	writeMu.Lock()
	defer writeMu.Unlock()
	w := c.file
	if w == nil {
		w = os.Stdout
	}
	w.WriteString(line)
}

// Warnf logs the message, if WARN is enabled, with the file:line of Warnf's
// caller. (A failed call's WARN is its last error: capi records both.)
func Warnf(format string, args ...any) { warn(0, format, args...) }

// WarnfDepth is Warnf for wrappers: the file:line shown is that of the
// caller depth frames above WarnfDepth's caller (0 behaves like Warnf).
func WarnfDepth(depth int, format string, args ...any) { warn(depth, format, args...) }

func warn(depth int, format string, args ...any) {
	c := get()
	if c.level < LevelWarn {
		return
	}
	msg := fmt.Sprintf(format, args...)
	f := caller(depth + 2) // warn, Warnf/WarnfDepth
	emit(prefix(c) + filepath.Base(f.File) + ":" + strconv.Itoa(f.Line) + " MSCCLPP WARN " + msg + "\n")
}

// malformedSeen holds the Malformed messages already printed.
var malformedSeen sync.Map

// Malformed reports a malformed environment variable (ignored, its default
// used) once per message: a WARN line like Warnf's when WARN is enabled, and
// otherwise the same line on stderr, so that a typo never goes unnoticed
// even with logging off.
func Malformed(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if _, dup := malformedSeen.LoadOrStore(msg, true); dup {
		return
	}
	c := get()
	f := caller(1) // Malformed
	line := prefix(c) + filepath.Base(f.File) + ":" + strconv.Itoa(f.Line) + " MSCCLPP WARN " + msg + "\n"
	if c.level >= LevelWarn {
		emit(line)
		return
	}
	os.Stderr.WriteString(line)
}

// Alertf is a WARN line like Warnf's that is never lost: with WARN disabled it
// goes to stderr, as Malformed's does. For what a user must see although they
// turned logging off (a hang report).
func Alertf(format string, args ...any) {
	c := get()
	f := caller(1) // Alertf
	line := prefix(c) + filepath.Base(f.File) + ":" + strconv.Itoa(f.Line) + " MSCCLPP WARN " + fmt.Sprintf(format, args...) + "\n"
	if c.level >= LevelWarn {
		emit(line)
		return
	}
	os.Stderr.WriteString(line)
}

// Infof logs at INFO when that level and sub are enabled.
func Infof(sub Subsys, format string, args ...any) {
	c := get()
	if c.level < LevelInfo || sub&c.mask == 0 {
		return
	}
	emit(prefix(c) + "MSCCLPP INFO " + fmt.Sprintf(format, args...) + "\n")
}

// Tracef logs at TRACE when that level and sub are enabled, with the
// milliseconds since the configuration was read and the caller's func:line.
// On a hot path, guard the call with Enabled(LevelTrace, sub) so that its
// arguments are not even boxed when tracing is off.
func Tracef(sub Subsys, format string, args ...any) { trace(0, sub, format, args...) }

// TracefDepth is Tracef for wrappers: the func:line shown is that of the
// caller depth frames above TracefDepth's caller.
func TracefDepth(depth int, sub Subsys, format string, args ...any) {
	trace(depth, sub, format, args...)
}

func trace(depth int, sub Subsys, format string, args ...any) {
	c := get()
	if c.level < LevelTrace || sub&c.mask == 0 {
		return
	}
	ms := float64(time.Since(c.epoch)) / float64(time.Millisecond)
	f := caller(depth + 2) // trace, Tracef/TracefDepth
	emit(prefix(c) + strconv.FormatFloat(ms, 'f', 6, 64) + " " + shortFunc(f.Function) + ":" +
		strconv.Itoa(f.Line) + " MSCCLPP TRACE " + fmt.Sprintf(format, args...) + "\n")
}

// Versionf logs at VERSION (so whenever any logging is on), for lines such as
// the library version that are printed once; deduplication is the caller's.
//
// NCCL prints VERSION lines bare and the spec gives no shape for them; this
// package keeps the usual host:pid:tid [dev] prefix so the line can be
// attributed, followed by "MSCCLPP <msg>" with no level word (VERSION is not
// a severity): "host:pid:tid [dev] MSCCLPP <msg>".
func Versionf(format string, args ...any) {
	c := get()
	if c.level < LevelVersion {
		return
	}
	emit(prefix(c) + "MSCCLPP " + fmt.Sprintf(format, args...) + "\n")
}

func prefix(c *config) string {
	return c.host + ":" + strconv.Itoa(c.pid) + ":" + strconv.Itoa(gettid()) +
		" [" + strconv.Itoa(int(device.Load())) + "] "
}

func emit(line string) {
	if h := handler.Load(); h != nil {
		(*h)(line)
		return
	}
	DefaultHandler(line)
}

// caller returns the frame skip frames above caller's caller.
func caller(skip int) runtime.Frame {
	var pc [1]uintptr
	if runtime.Callers(skip+2, pc[:]) == 0 { // runtime.Callers, caller
		return runtime.Frame{File: "???", Function: "???"}
	}
	f, _ := runtime.CallersFrames(pc[:]).Next()
	if f.File == "" {
		f.File = "???"
	}
	if f.Function == "" {
		f.Function = "???"
	}
	return f
}

// shortFunc drops the import path and package name from a Go function name:
// "example.com/a/pkg.(*T).M" becomes "(*T).M".
func shortFunc(name string) string {
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	if i := strings.IndexByte(name, '.'); i >= 0 {
		name = name[i+1:]
	}
	return name
}
