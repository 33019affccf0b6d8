package energy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"unicode/utf16"
)

// The platform's Energy Meter Interface (Windows's emi.h): a device
// interface of class GUID_DEVICE_ENERGY_METER
// {45BD8344-7ED6-49cf-A440-C276C933B053} whose driver answers four IOCTLs:
// IOCTL_EMI_GET_VERSION (EMI_VERSION: a USHORT, 1 or 2),
// IOCTL_EMI_GET_METADATA_SIZE (a ULONG), IOCTL_EMI_GET_METADATA
// (EMI_METADATA_V1 or _V2: the meter's maker, model and channels) and
// IOCTL_EMI_GET_MEASUREMENT (each channel's absolute energy in picowatt-
// hours, and the time of it in 100 ns). Layouts as emi.h declares them
// (jchoi2022/NtFuzz-HeaderData@6adc3d339e6cac072cde6cfef07eccafbc6b204c:include/emi_dd20d41a.h,
// the SDK header preprocessed; the IOCTL codes and EMI_NAME_MAX 16 from
// the header's defines), read as Chromium's
// components/power_metrics/energy_metrics_provider_win.cc reads them. The
// parsing here is the OS's whole part but the IOCTLs themselves
// (emi_windows.go): it is tested against the bytes emi.h lays out, and
// has not been seen on Windows itself (Wine has no such device).

// EMIDevice is one energy meter device.
type EMIDevice interface {
	Path() string
	// Version is IOCTL_EMI_GET_VERSION's EmiVersion.
	Version() (uint16, error)
	// Metadata is IOCTL_EMI_GET_METADATA's answer, of the size
	// IOCTL_EMI_GET_METADATA_SIZE gives (at most MaxEMIMetadata).
	Metadata() ([]byte, error)
	// Measure puts IOCTL_EMI_GET_MEASUREMENT's answer in buf and says
	// how much of it there is.
	Measure(buf []byte) (int, error)
	Close() error
}

// EMI's figures.
const (
	emiNameMax     = 16 // EMI_NAME_MAX: WCHARs of a maker's or model's name
	MaxEMIMetadata = 64 << 10
	maxEMIChannels = 256
	// joulesPerPWh is a picowatt-hour in joules: 1e-12 W × 3600 s.
	joulesPerPWh = 3.6e-9
)

// emiChannel is one channel of a meter.
type emiChannel struct {
	name     string
	hardware string // "OEM model"
}

// emiChannels reads a meter's metadata: its channels, each measured in
// picowatt-hours (EmiMeasurementUnitPicowattHours, 0, the one unit emi.h
// has). V1 (EMI_METADATA_V1): MeasurementUnit, HardwareOEM[16],
// HardwareModel[16], HardwareRevision, MeteredHardwareNameSize (bytes),
// MeteredHardwareName: one channel. V2 (EMI_METADATA_V2): HardwareOEM[16],
// HardwareModel[16], HardwareRevision, ChannelCount, then each channel's
// EMI_CHANNEL_V2: MeasurementUnit, ChannelNameSize (bytes), ChannelName,
// the next right after (EMI_CHANNEL_V2_NEXT_CHANNEL).
func emiChannels(version uint16, b []byte) ([]emiChannel, error) {
	le := binary.LittleEndian
	switch version {
	case 1:
		const head = 4 + 2*emiNameMax*2 + 2 + 2
		if len(b) < head {
			return nil, fmt.Errorf("metadata of %d bytes, less than EMI_METADATA_V1's %d", len(b), head)
		}
		if u := le.Uint32(b); u != 0 {
			return nil, fmt.Errorf("a channel measured in unit %d, not picowatt-hours", u)
		}
		hw := wstr(b[4:36]) + " " + wstr(b[36:68])
		size := int(le.Uint16(b[70:]))
		if head+size > len(b) {
			return nil, fmt.Errorf("a channel name of %d bytes past the metadata's %d", size, len(b))
		}
		return []emiChannel{{name: wstr(b[head : head+size]), hardware: hw}}, nil
	case 2:
		const head = 2*emiNameMax*2 + 2 + 2
		if len(b) < head {
			return nil, fmt.Errorf("metadata of %d bytes, less than EMI_METADATA_V2's %d", len(b), head)
		}
		hw := wstr(b[0:32]) + " " + wstr(b[32:64])
		count := int(le.Uint16(b[66:]))
		if count > maxEMIChannels {
			return nil, fmt.Errorf("%d channels, more than any meter has (%d)", count, maxEMIChannels)
		}
		var out []emiChannel
		for off, i := head, 0; i < count; i++ {
			if off+6 > len(b) {
				return nil, fmt.Errorf("channel %d of %d past the metadata's %d bytes", i, count, len(b))
			}
			if u := le.Uint32(b[off:]); u != 0 {
				return nil, fmt.Errorf("channel %d measured in unit %d, not picowatt-hours", i, u)
			}
			size := int(le.Uint16(b[off+4:]))
			if off+6+size > len(b) {
				return nil, fmt.Errorf("channel %d's name of %d bytes past the metadata's %d", i, size, len(b))
			}
			out = append(out, emiChannel{name: wstr(b[off+6 : off+6+size]), hardware: hw})
			off += 6 + size
		}
		return out, nil
	}
	return nil, fmt.Errorf("EMI version %d, where 1 and 2 are known", version)
}

// wstr is a UTF-16LE string up to its first NUL, bounded and printable.
func wstr(b []byte) string {
	u := make([]uint16, 0, len(b)/2)
	for i := 0; i+1 < len(b); i += 2 {
		c := binary.LittleEndian.Uint16(b[i:])
		if c == 0 {
			break
		}
		u = append(u, c)
	}
	s := strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return '?'
		}
		return r
	}, string(utf16.Decode(u)))
	return clip(strings.TrimSpace(s), 40)
}

// emiSource reads one channel of a meter.
type emiSource struct {
	info  Info
	dev   EMIDevice
	index int
	buf   []byte // a measurement of every channel: 16 bytes each
}

func (s *emiSource) Info() Info   { return s.info }
func (s *emiSource) Close() error { return s.dev.Close() }

// Read is the channel's absolute energy, in joules.
func (s *emiSource) Read() (float64, error) {
	n, err := s.dev.Measure(s.buf)
	if err != nil {
		return 0, fmt.Errorf("%s: IOCTL_EMI_GET_MEASUREMENT: %v", s.dev.Path(), err)
	}
	at := 16 * s.index
	if n < at+16 {
		return 0, fmt.Errorf("%s: a measurement of %d bytes, without channel %d's", s.dev.Path(), n, s.index)
	}
	pwh := binary.LittleEndian.Uint64(s.buf[at:])
	return bounded(s.info, float64(pwh)*joulesPerPWh)
}

// openEMI opens channel n of the energy meters, counted over every meter
// in the order the system lists them.
func openEMI(env Env, n int) (Source, error) {
	list := env.EMI
	if list == nil {
		list = SystemEMI
	}
	devs, err := list()
	if err != nil {
		return nil, notHere("the Energy Meter Interface: %v", err)
	}
	if len(devs) == 0 {
		return nil, notHere("no energy meter here (no device interface of GUID_DEVICE_ENERGY_METER {45BD8344-7ED6-49cf-A440-C276C933B053})")
	}
	var why, seen []string
	at := 0
	var src *emiSource
	for _, d := range devs {
		if src != nil {
			d.Close()
			continue
		}
		chans, err := deviceChannels(d)
		if err != nil {
			why = append(why, d.Path()+": "+err.Error())
			d.Close()
			continue
		}
		for i, c := range chans {
			seen = append(seen, fmt.Sprintf("emi:%d %s (%s)", at, c.name, c.hardware))
			if at == n {
				src = &emiSource{dev: d, index: i, buf: make([]byte, 16*len(chans)), info: Info{
					Name: fmt.Sprintf("emi:%d", n), Quantity: Counter, Method: NotKnown, Poll: DefaultPoll,
					Boundary: fmt.Sprintf("the meter's channel %q of %s (Energy Meter Interface)", c.name, c.hardware)}}
			}
			at++
		}
		if src == nil {
			d.Close()
		}
	}
	if src != nil {
		return src, nil
	}
	if len(seen) == 0 {
		return nil, notHere("no energy meter could be read: %s", strings.Join(why, "; "))
	}
	return nil, notHere("emi:%d: the energy meters have %d channels: %s", n, at, strings.Join(seen, ", "))
}

// deviceChannels asks a meter its version and metadata.
func deviceChannels(d EMIDevice) ([]emiChannel, error) {
	v, err := d.Version()
	if err != nil {
		return nil, fmt.Errorf("IOCTL_EMI_GET_VERSION: %w", err)
	}
	meta, err := d.Metadata()
	if err != nil {
		return nil, fmt.Errorf("IOCTL_EMI_GET_METADATA: %w", err)
	}
	chans, err := emiChannels(v, meta)
	if err == nil && len(chans) == 0 {
		err = errors.New("no channel")
	}
	return chans, err
}
