package logx

import (
	"fmt"
	"strconv"
)

// MaxPeerText is the most bytes of one peer-supplied text that PeerText shows.
const MaxPeerText = 256

// PeerText is text another process supplied (a rank's setup report, its answer to a job view),
// fit to print: at most MaxPeerText of its bytes, quoted in Go syntax, so that it is printable
// ASCII on one line (an escape sequence, a newline or a forged "MSCCLPP WARN" line shows as
// its escaped bytes inside the quotes) and says how long the rest was.
func PeerText(s string) string {
	if len(s) <= MaxPeerText {
		return strconv.QuoteToASCII(s)
	}
	return fmt.Sprintf("%s... (%d more bytes)", strconv.QuoteToASCII(s[:MaxPeerText]), len(s)-MaxPeerText)
}
