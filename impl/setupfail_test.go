package impl

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/mscclpp-go/mscclpp/impl/logx"
	"github.com/mscclpp-go/mscclpp/impl/status"
)

// TestSetupReportCodes: a peer's setup report reaches this rank with its code when the code is
// one of the API's results, as InternalError when it says Success, and is refused as malformed
// (RemoteError) when the code is none of them, so no caller sees a result outside the enum.
func TestSetupReportCodes(t *testing.T) {
	report := func(code uint32) []byte {
		b := binary.LittleEndian.AppendUint32(nil, code)
		b = binary.LittleEndian.AppendUint32(b, 0)
		b = binary.LittleEndian.AppendUint16(b, 4)
		return append(b, "oops"...)
	}
	for _, tc := range []struct {
		code uint32
		want status.Code
		bad  bool
	}{
		{uint32(status.RemoteError), status.RemoteError, false},
		{uint32(status.SystemError), status.SystemError, false},
		{uint32(status.Success), status.InternalError, false},
		{uint32(status.NumResults), 0, true},
		{0xffffffff, 0, true},
	} {
		r, err := decodeReport(report(tc.code))
		if tc.bad {
			var se *status.Error
			if err == nil || !errors.As(err, &se) || se.Code != status.RemoteError || !strings.Contains(err.Error(), "malformed setup report") {
				t.Errorf("code %d: got %v, %v; want a malformed report (RemoteError)", tc.code, r, err)
			}
			continue
		}
		if err != nil || r.code != tc.want || r.text != logx.PeerText("oops") {
			t.Errorf("code %d: got %+v, %v; want code %d and the text, quoted", tc.code, r, err, tc.want)
		}
	}
}
