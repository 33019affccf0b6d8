package energy

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"unicode/utf16"
)

// fakeMeter is an energy meter device as emi.h lays out its answers.
type fakeMeter struct {
	path       string
	version    uint16
	meta       []byte
	verErr     error
	energy     []uint64 // picowatt-hours, a channel each
	measureErr error
	closed     bool
}

func (m *fakeMeter) Path() string              { return m.path }
func (m *fakeMeter) Version() (uint16, error)  { return m.version, m.verErr }
func (m *fakeMeter) Metadata() ([]byte, error) { return m.meta, nil }
func (m *fakeMeter) Close() error              { m.closed = true; return nil }
func (m *fakeMeter) Measure(buf []byte) (int, error) {
	if m.measureErr != nil {
		return 0, m.measureErr
	}
	n := 0
	for i, e := range m.energy {
		if 16*i+16 > len(buf) {
			break
		}
		binary.LittleEndian.PutUint64(buf[16*i:], e)
		binary.LittleEndian.PutUint64(buf[16*i+8:], uint64(i)*1e7)
		n += 16
	}
	return n, nil
}

// wchars is s in UTF-16LE, NUL-terminated, padded to n WCHARs (0: as long
// as it is).
func wchars(s string, n int) []byte {
	u := append(utf16.Encode([]rune(s)), 0)
	if n > 0 {
		u = append(u, make([]uint16, n-len(u))...)
	}
	b := make([]byte, 2*len(u))
	for i, c := range u {
		binary.LittleEndian.PutUint16(b[2*i:], c)
	}
	return b
}

func le16(v uint16) []byte { return binary.LittleEndian.AppendUint16(nil, v) }
func le32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }

// metaV2 is EMI_METADATA_V2 with the channels named.
func metaV2(names ...string) []byte {
	b := append(wchars("Intel", 16), wchars("EMI Meter", 16)...)
	b = append(b, le16(3)...)
	b = append(b, le16(uint16(len(names)))...)
	for _, n := range names {
		w := wchars(n, 0)
		b = append(append(append(b, le32(0)...), le16(uint16(len(w)))...), w...)
	}
	return b
}

// metaV1 is EMI_METADATA_V1.
func metaV1(name string) []byte {
	b := append(le32(0), wchars("Qualcomm", 16)...)
	b = append(b, wchars("PMIC", 16)...)
	w := wchars(name, 0)
	return append(append(append(b, le16(1)...), le16(uint16(len(w)))...), w...)
}

func TestEMIChannels(t *testing.T) {
	chans, err := emiChannels(2, metaV2("RAPL_Package0_PKG", "RAPL_Package0_PP1"))
	if err != nil || len(chans) != 2 || chans[0].name != "RAPL_Package0_PKG" || chans[1].name != "RAPL_Package0_PP1" || chans[1].hardware != "Intel EMI Meter" {
		t.Errorf("V2: %+v, %v", chans, err)
	}
	chans, err = emiChannels(1, metaV1("SoC"))
	if err != nil || len(chans) != 1 || chans[0].name != "SoC" || chans[0].hardware != "Qualcomm PMIC" {
		t.Errorf("V1: %+v, %v", chans, err)
	}
	good := metaV2("PKG")
	notPWh := metaV2("PKG")
	notPWh[68] = 1
	long := metaV2("PKG")
	binary.LittleEndian.PutUint16(long[66:], 2) // two channels said, one there
	v1 := metaV1("SoC")
	v1[0] = 1
	for _, c := range []struct {
		version uint16
		meta    []byte
		why     string
	}{
		{2, good[:67], "metadata of 67 bytes, less than EMI_METADATA_V2's 68"},
		{2, good[:68+5], "channel 0 of 1 past the metadata's 73 bytes"},
		{2, good[:len(good)-1], "channel 0's name of 8 bytes past the metadata's 81"},
		{2, notPWh, "channel 0 measured in unit 1, not picowatt-hours"},
		{2, long, "channel 1 of 2 past the metadata's 82 bytes"},
		{2, append(good[:66:66], le16(257)...), "257 channels, more than any meter has (256)"},
		{1, v1, "a channel measured in unit 1, not picowatt-hours"},
		{1, metaV1("SoC")[:71], "metadata of 71 bytes, less than EMI_METADATA_V1's 72"},
		{1, metaV1("SoC")[:73], "a channel name of 8 bytes past the metadata's 73"},
		{3, good, "EMI version 3, where 1 and 2 are known"},
	} {
		if _, err := emiChannels(c.version, c.meta); err == nil || err.Error() != c.why {
			t.Errorf("emiChannels(v%d, %d bytes) = %v, want %q", c.version, len(c.meta), err, c.why)
		}
	}
	// At the bound: 256 channels are read.
	names := make([]string, 256)
	for i := range names {
		names[i] = "c"
	}
	if chans, err := emiChannels(2, metaV2(names...)); err != nil || len(chans) != 256 {
		t.Errorf("256 channels: %d, %v", len(chans), err)
	}
	if got := wstr(wchars("a\x01b\u00e9", 0)); got != "a?bé" {
		t.Errorf("wstr = %q", got)
	}
}

func TestOpenEMI(t *testing.T) {
	broken := &fakeMeter{path: `\\?\broken`, verErr: errors.New("ERROR_ACCESS_DENIED")}
	intel := &fakeMeter{path: `\\?\intel`, version: 2, meta: metaV2("RAPL_Package0_PKG", "RAPL_Package0_PP1"), energy: []uint64{1e12, 5e11}}
	env := Env{EMI: func() ([]EMIDevice, error) { return []EMIDevice{broken, intel}, nil }}
	src, passed, err := Open(Spec{Kind: "emi", Arg: "1"}, nil, env)
	if err != nil || passed != nil {
		t.Fatalf("Open(emi:1): %v", err)
	}
	info := src.Info()
	if info.Name != "emi:1" || info.Quantity != Counter || info.Boundary != `the meter's channel "RAPL_Package0_PP1" of Intel EMI Meter (Energy Meter Interface)` {
		t.Errorf("info %+v", info)
	}
	// 5e11 pWh is 0.5 Wh, 1800 J.
	if j, err := src.Read(); err != nil || j < 1800-1e-6 || j > 1800+1e-6 {
		t.Errorf("Read = %v J, %v; want 1800", j, err)
	}
	intel.energy = intel.energy[:1]
	if _, err := src.Read(); err == nil || !strings.Contains(err.Error(), "a measurement of 16 bytes, without channel 1's") {
		t.Errorf("a short measurement: %v", err)
	}
	intel.measureErr = errors.New("ERROR_GEN_FAILURE")
	if _, err := src.Read(); err == nil || !strings.Contains(err.Error(), `\\?\intel: IOCTL_EMI_GET_MEASUREMENT: ERROR_GEN_FAILURE`) {
		t.Errorf("a failed measurement: %v", err)
	}
	src.Close()
	if !intel.closed {
		t.Error("the meter read was not closed")
	}
	intel.measureErr, intel.energy = nil, []uint64{1e12, 5e11}
	for _, c := range []struct {
		env Env
		arg string
		why string
	}{
		{env, "2", `emi:2: the energy meters have 2 channels: emi:0 RAPL_Package0_PKG (Intel EMI Meter), emi:1 RAPL_Package0_PP1 (Intel EMI Meter)`},
		{Env{EMI: func() ([]EMIDevice, error) { return nil, nil }}, "", "no energy meter here (no device interface of GUID_DEVICE_ENERGY_METER {45BD8344-7ED6-49cf-A440-C276C933B053})"},
		{Env{EMI: func() ([]EMIDevice, error) { return nil, errors.New("CM_Get_Device_Interface_List: failed") }}, "", "the Energy Meter Interface: CM_Get_Device_Interface_List: failed"},
		{Env{EMI: func() ([]EMIDevice, error) { return []EMIDevice{broken}, nil }}, "", `no energy meter could be read: \\?\broken: IOCTL_EMI_GET_VERSION: ERROR_ACCESS_DENIED`},
	} {
		_, _, err := Open(Spec{Kind: "emi", Arg: c.arg}, nil, c.env)
		if !errors.Is(err, ErrUnavailable) || err.Error() != c.why {
			t.Errorf("Open(emi:%s) = %v, want %q", c.arg, err, c.why)
		}
	}
	if s, err := ParseSpec("emi:1"); err != nil || s != (Spec{Kind: "emi", Arg: "1"}) {
		t.Errorf("ParseSpec(emi:1) = %+v, %v", s, err)
	}
	if _, err := ParseSpec("emi:pkg"); err == nil {
		t.Error("ParseSpec(emi:pkg) took a name for a channel's number")
	}
}
