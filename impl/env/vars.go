package env

// Var is an environment variable the library reads: one of the constants of the table below,
// the one home of every setting (docs/ENVIRONMENT.md has an entry for each). Code reads a
// variable only through its Var, at the moment its entry says; tests/go/settings_test.go holds
// every other file to that (no other getenv, no variable name spelled out anywhere else), the
// bootstrap included.
type Var string

// The table, in docs/ENVIRONMENT.md's order, each with the file that reads it and when. Each
// package reads its own variables through this table (impl/config.go for the core and every
// transport's declared settings): the bootstrap, the logger and the CUDA loader sit below
// config.go's package and run before any communicator exists.
const (
	// Logging, read by impl/logx at the first log line.
	Debug       Var = "MSCCLPP_DEBUG"
	DebugSubsys Var = "MSCCLPP_DEBUG_SUBSYS"
	DebugFile   Var = "MSCCLPP_DEBUG_FILE"
	// HangReportS is read by impl/config.go at init.
	HangReportS Var = "MSCCLPP_HANG_REPORT_S"

	// The bootstrap's, read by impl/bootstrap/settings.go at mscclppGetUniqueId and at init;
	// BootstrapTimeout by impl/config.go at init.
	CommID           Var = "MSCCLPP_COMM_ID"
	SocketIfname     Var = "MSCCLPP_SOCKET_IFNAME"
	SocketFamily     Var = "MSCCLPP_SOCKET_FAMILY"
	BootstrapTimeout Var = "MSCCLPP_BOOTSTRAP_TIMEOUT"
	BootstrapSpinUS  Var = "MSCCLPP_BOOTSTRAP_SPIN_US"
	BootstrapSecret  Var = "MSCCLPP_BOOTSTRAP_SECRET" // never logged (hidden)
	SecretFile       Var = "MSCCLPP_BOOTSTRAP_SECRET_FILE"
	// Home is where the bootstrap looks for the secret file by default, as os.UserHomeDir
	// (which reads Go's copy of the environment, taken at load time).
	Home   Var = "HOME"
	HostID Var = "MSCCLPP_HOSTID" // impl/config.go, at init

	// Modes and drivers: Device is a P2P setting (impl/p2p's Entry.Settings, read by
	// impl/config.go at init); CudaLibrary is read by cuda/cuda.go when the driver first loads.
	Device      Var = "MSCCLPP_DEVICE"
	CudaLibrary Var = "MSCCLPP_CUDA_LIBRARY"

	// Host waits and the proxy, read by impl/config.go at init (the proxy's also at
	// mscclppProxyLaunch).
	WaitSpin        Var = "MSCCLPP_WAIT_SPIN"
	WaitYield       Var = "MSCCLPP_WAIT_YIELD"
	WaitSleepMaxUs  Var = "MSCCLPP_WAIT_SLEEP_MAX_US"
	ProxySpin       Var = "MSCCLPP_PROXY_SPIN"
	ProxyYield      Var = "MSCCLPP_PROXY_YIELD"
	ProxySleepMaxUs Var = "MSCCLPP_PROXY_SLEEP_MAX_US"
	Membarrier      Var = "MSCCLPP_MEMBARRIER"

	// The SHM transport's: EagerBytes is its Entry.Settings; all read by impl/config.go at init.
	EagerBytes         Var = "MSCCLPP_EAGER_BYTES"
	StreamCopyBytes    Var = "MSCCLPP_STREAM_COPY_BYTES"
	StreamCopyMaxBytes Var = "MSCCLPP_STREAM_COPY_MAX_BYTES"
	StreamCopyAuto     Var = "MSCCLPP_STREAM_COPY_AUTO"

	// The InfiniBand transport's (impl/ib's Entry.Settings), read by impl/config.go at init.
	IBVSo       Var = "MSCCLPP_IBV_SO"
	IBHCA       Var = "MSCCLPP_IB_HCA"
	IBGIDIndex  Var = "MSCCLPP_IB_GID_INDEX"
	IBTC        Var = "MSCCLPP_IB_TC"
	IBSL        Var = "MSCCLPP_IB_SL"
	IBTimeout   Var = "MSCCLPP_IB_TIMEOUT"
	IBRetryCnt  Var = "MSCCLPP_IB_RETRY_CNT"
	IBMaxSendWr Var = "MSCCLPP_IB_MAX_SEND_WR"

	// Tools is the one variable not read through its Var: capi/tools.c reads it with getenv in
	// the library's constructor, before the Go runtime is sure to be up (it is never logged).
	Tools Var = "MSCCLPP_TOOLS"
)

// table lists every constant above (env's test checks that none is missing), for Declared.
var table = [...]Var{
	Debug, DebugSubsys, DebugFile, HangReportS,
	CommID, SocketIfname, SocketFamily, BootstrapTimeout, BootstrapSpinUS, BootstrapSecret, SecretFile, Home, HostID,
	Device, CudaLibrary,
	WaitSpin, WaitYield, WaitSleepMaxUs, ProxySpin, ProxyYield, ProxySleepMaxUs, Membarrier,
	EagerBytes, StreamCopyBytes, StreamCopyMaxBytes, StreamCopyAuto,
	IBVSo, IBHCA, IBGIDIndex, IBTC, IBSL, IBTimeout, IBRetryCnt, IBMaxSendWr,
	Tools,
}

// Declared returns the table's Var named name, and whether the table has one: how the core
// reads the variables a transport names in its Entry.Settings.
func Declared(name string) (Var, bool) {
	for _, v := range table {
		if string(v) == name {
			return v, true
		}
	}
	return "", false
}

// Raw returns the variable's value as getenv sees it now, reporting nothing.
func (v Var) Raw() (string, bool) { return raw(string(v)) }

// Lookup returns the variable's value as getenv sees it now and whether it is set; a non-empty
// value is reported once per value (see SetReporter), the secret's as "a value (not shown)".
func (v Var) Lookup() (string, bool) {
	s, ok := raw(string(v))
	if ok && s != "" {
		v.Report(s)
	}
	return s, ok
}

// Get is Lookup without the flag: "" when unset.
func (v Var) Get() string {
	s, _ := v.Lookup()
	return s
}

// Report tells the reporter that the variable was read with value, unless that value was
// already reported; for variables read with Raw. The secret's value is never passed on.
func (v Var) Report(value string) {
	if v == BootstrapSecret {
		value = "a value (not shown)"
	}
	report(string(v), value)
}
