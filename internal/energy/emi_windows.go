//go:build windows

package energy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/windows"
)

// guidEnergyMeter is GUID_DEVICE_ENERGY_METER.
var guidEnergyMeter = windows.GUID{Data1: 0x45bd8344, Data2: 0x7ed6, Data3: 0x49cf, Data4: [8]byte{0xa4, 0x40, 0xc2, 0x76, 0xc9, 0x33, 0xb0, 0x53}}

// The IOCTLs: CTL_CODE(FILE_DEVICE_UNKNOWN, n, METHOD_BUFFERED,
// FILE_READ_ACCESS), n from 0 to 3.
const (
	ioctlEMIVersion      = 0x22<<16 | 1<<14 | 0<<2
	ioctlEMIMetadataSize = 0x22<<16 | 1<<14 | 1<<2
	ioctlEMIMetadata     = 0x22<<16 | 1<<14 | 2<<2
	ioctlEMIMeasurement  = 0x22<<16 | 1<<14 | 3<<2
)

// SystemEMI opens every energy meter device present: the device
// interfaces of GUID_DEVICE_ENERGY_METER (CM_Get_Device_Interface_List).
// A device that cannot be opened is listed all the same, and says why at
// its first question.
func SystemEMI() ([]EMIDevice, error) {
	paths, err := windows.CM_Get_Device_Interface_List("", &guidEnergyMeter, windows.CM_GET_DEVICE_INTERFACE_LIST_PRESENT)
	var cr windows.CONFIGRET
	if errors.As(err, &cr) {
		// its Error asks cfgmgr32's CM_MapCrToWin32Err, which Wine lacks
		return nil, fmt.Errorf("CM_Get_Device_Interface_List: CONFIGRET %#x", uint32(cr))
	}
	if err != nil {
		return nil, fmt.Errorf("CM_Get_Device_Interface_List: %v", err)
	}
	var out []EMIDevice
	for _, p := range paths {
		d := &emiDevice{path: p}
		name, err := windows.UTF16PtrFromString(p)
		if err == nil {
			d.h, err = windows.CreateFile(name, windows.GENERIC_READ, windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE, nil, windows.OPEN_EXISTING, 0, 0)
		}
		d.err = err
		out = append(out, d)
	}
	return out, nil
}

// emiDevice is one meter, opened.
type emiDevice struct {
	path string
	h    windows.Handle
	err  error // why it could not be opened
}

func (d *emiDevice) Path() string { return d.path }

func (d *emiDevice) ioctl(code uint32, out []byte) (int, error) {
	if d.err != nil {
		return 0, d.err
	}
	var n uint32
	err := windows.DeviceIoControl(d.h, code, nil, 0, unsafe.SliceData(out), uint32(len(out)), &n, nil)
	return int(n), err
}

func (d *emiDevice) Version() (uint16, error) {
	b := make([]byte, 2)
	n, err := d.ioctl(ioctlEMIVersion, b)
	if err == nil && n < 2 {
		err = fmt.Errorf("an answer of %d bytes", n)
	}
	return binary.LittleEndian.Uint16(b), err
}

func (d *emiDevice) Metadata() ([]byte, error) {
	b := make([]byte, 4)
	n, err := d.ioctl(ioctlEMIMetadataSize, b)
	if err != nil {
		return nil, fmt.Errorf("IOCTL_EMI_GET_METADATA_SIZE: %v", err)
	}
	size := binary.LittleEndian.Uint32(b)
	if n < 4 || size == 0 || size > MaxEMIMetadata {
		return nil, fmt.Errorf("IOCTL_EMI_GET_METADATA_SIZE: %d bytes (at most %d)", size, MaxEMIMetadata)
	}
	meta := make([]byte, size)
	n, err = d.ioctl(ioctlEMIMetadata, meta)
	return meta[:n], err
}

func (d *emiDevice) Measure(buf []byte) (int, error) { return d.ioctl(ioctlEMIMeasurement, buf) }

func (d *emiDevice) Close() error {
	if d.err != nil {
		return nil
	}
	return windows.CloseHandle(d.h)
}
