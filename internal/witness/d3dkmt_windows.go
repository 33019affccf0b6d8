//go:build windows

package witness

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/windows"
)

// The kernel's graphics scheduler (dxgkrnl) keeps, for every process and
// adapter, the running time of each engine (node) and the memory committed
// in each segment: Task Manager's per-process GPU and NPU columns read them
// through D3DKMTQueryStatistics (gdi32), as this does.
//
// The structures are those of the Windows SDK's shared/d3dkmthk.h,
// 10.0.22000.0 (field order as generated from it,
// smourier/DirectN@03065d1498851a25c874963b01b11a7c8ff0a3d6:DirectN/DirectN/Generated/_D3DKMT_QUERYSTATISTICS.cs,
// _D3DKMT_QUERYSTATISTICS_PROCESS_NODE_INFORMATION.cs,
// _D3DKMT_QUERYSTATISTICS_PROCESS_SEGMENT_INFORMATION.cs), with the sizes a
// 64-bit build has: D3DKMT_QUERYSTATISTICS is 0x328 bytes, its
// QueryResult union 776 bytes at offset 24 and the query's union at offset
// 800 (a re-declaration that asserts them with static_assert,
// fastfetch-cli/fastfetch@a961a964ff89322b6f595fdbe842503e4fca671d:src/detection/gpu/d3dkmthk.h).
// TestD3DKMTLayout pins every offset used.
//
// Wine has none of these statistics: this reading was tested against
// fakes (loaded_test.go), and has not been seen on Windows itself.

var (
	gdi32              = windows.NewLazySystemDLL("gdi32.dll")
	procEnumAdapters2  = gdi32.NewProc("D3DKMTEnumAdapters2")
	procQueryAdapter   = gdi32.NewProc("D3DKMTQueryAdapterInfo")
	procQueryStatistic = gdi32.NewProc("D3DKMTQueryStatistics")
	procCloseAdapter   = gdi32.NewProc("D3DKMTCloseAdapter")
)

// D3DKMT_QUERYSTATISTICS_TYPE values used.
const (
	statsAdapter        = 0 // D3DKMT_QUERYSTATISTICS_ADAPTER
	statsProcessSegment = 4 // D3DKMT_QUERYSTATISTICS_PROCESS_SEGMENT
	statsProcessNode    = 6 // D3DKMT_QUERYSTATISTICS_PROCESS_NODE
)

// KMTQUERYADAPTERINFOTYPE values used.
const (
	qaiAdapterType = 15 // KMTQAITYPE_ADAPTERTYPE: D3DKMT_ADAPTERTYPE
	qaiDeviceIDs   = 31 // KMTQAITYPE_PHYSICALADAPTERDEVICEIDS: D3DKMT_QUERY_DEVICE_IDS
)

// D3DKMT_ADAPTERTYPE's bits.
const (
	typeRender      = 1 << 0  // RenderSupported
	typeSoftware    = 1 << 2  // SoftwareDevice
	typeComputeOnly = 1 << 11 // ComputeOnly (WDDM 2.6)
)

// Bounds of one adapter's statistics read (D3DKMT_MAX_SEGMENT_COUNT is
// 32; a GPU has some tens of nodes).
const (
	maxAdapters = 64
	maxNodes    = 256
	maxSegments = 64
)

// adapterInfo is D3DKMT_ADAPTERINFO.
type adapterInfo struct {
	hAdapter uint32
	luidLow  uint32
	luidHigh int32
	_        uint32 // NumOfSources
	_        int32  // bPrecisePresentRegionsPreferred
}

// enumAdapters2 is D3DKMT_ENUMADAPTERS2.
type enumAdapters2 struct {
	numAdapters uint32
	adapters    *adapterInfo
}

// queryAdapterInfo is D3DKMT_QUERYADAPTERINFO.
type queryAdapterInfo struct {
	hAdapter uint32
	typ      uint32
	data     unsafe.Pointer
	size     uint32
}

// queryDeviceIDs is D3DKMT_QUERY_DEVICE_IDS.
type queryDeviceIDs struct {
	physicalAdapterIndex                                    uint32
	vendor, device, subVendor, subSystem, revision, busType uint32
}

// queryStatistics is D3DKMT_QUERYSTATISTICS: Type, AdapterLuid, hProcess,
// the QueryResult union (read by offset), and the query's union (a
// segment's or node's id, the first ULONG of each).
type queryStatistics struct {
	typ      uint32
	luidLow  uint32
	luidHigh int32
	_        uint32
	process  windows.Handle
	result   [776]byte
	queryID  uint32
	_        uint32
}

// Offsets in QueryResult.
const (
	resultNbSegments     = 0 // AdapterInformation.NbSegments (ULONG)
	resultNodeCount      = 4 // AdapterInformation.NodeCount (ULONG)
	resultRunningTime    = 0 // ProcessNodeInformation.RunningTime (LARGE_INTEGER, 100 ns)
	resultBytesCommitted = 0 // ProcessSegmentInformation.BytesCommitted (ULONGLONG)
)

// ntstatus is an NTSTATUS that is not success.
type ntstatus uint32

func (s ntstatus) Error() string { return fmt.Sprintf("NTSTATUS %#08x", uint32(s)) }

// call calls a D3DKMT function with its one argument.
func call(p *windows.LazyProc, arg unsafe.Pointer) error {
	if err := p.Find(); err != nil {
		return fmt.Errorf("%s: not in gdi32.dll", p.Name)
	}
	r, _, _ := p.Call(uintptr(arg))
	if int32(r) < 0 {
		return fmt.Errorf("%s: %w", p.Name, ntstatus(r))
	}
	return nil
}

// d3dkmt reads the statistics through gdi32.
type d3dkmt struct {
	// nodes and segments of each adapter, by LUID, as listed, or why
	// they could not be
	counts map[uint64][2]int
	errs   map[uint64]error
}

// SystemAdapters is the kernel's adapter statistics: D3DKMT.
func SystemAdapters() Adapters {
	return &d3dkmt{counts: map[uint64][2]int{}, errs: map[uint64]error{}}
}

func (d *d3dkmt) List() ([]Adapter, error) {
	var e enumAdapters2
	if err := call(procEnumAdapters2, unsafe.Pointer(&e)); err != nil {
		return nil, err
	}
	n := min(e.numAdapters, maxAdapters)
	if n == 0 {
		return nil, nil
	}
	infos := make([]adapterInfo, n)
	e = enumAdapters2{numAdapters: n, adapters: &infos[0]}
	if err := call(procEnumAdapters2, unsafe.Pointer(&e)); err != nil {
		return nil, err
	}
	var out []Adapter
	for _, info := range infos[:min(e.numAdapters, n)] {
		a := Adapter{LUID: uint64(uint32(info.luidHigh))<<32 | uint64(info.luidLow)}
		var typ uint32
		q := queryAdapterInfo{hAdapter: info.hAdapter, typ: qaiAdapterType, data: unsafe.Pointer(&typ), size: uint32(unsafe.Sizeof(typ))}
		if call(procQueryAdapter, unsafe.Pointer(&q)) == nil {
			a.Render, a.Software, a.ComputeOnly = typ&typeRender != 0, typ&typeSoftware != 0, typ&typeComputeOnly != 0
		}
		var ids queryDeviceIDs
		q = queryAdapterInfo{hAdapter: info.hAdapter, typ: qaiDeviceIDs, data: unsafe.Pointer(&ids), size: uint32(unsafe.Sizeof(ids))}
		if call(procQueryAdapter, unsafe.Pointer(&q)) == nil {
			a.Vendor, a.Device = ids.vendor, ids.device
		}
		h := info.hAdapter
		call(procCloseAdapter, unsafe.Pointer(&h))
		s := queryStatistics{typ: statsAdapter, luidLow: info.luidLow, luidHigh: info.luidHigh}
		if err := call(procQueryStatistic, unsafe.Pointer(&s)); err != nil {
			// its nodes and segments unknown: each process's use of it
			// is unread, and says why
			d.errs[a.LUID] = err
			out = append(out, a)
			continue
		}
		segs := int(min(d3dLE32(s.result[resultNbSegments:]), maxSegments))
		nodes := int(min(d3dLE32(s.result[resultNodeCount:]), maxNodes))
		d.counts[a.LUID] = [2]int{nodes, segs}
		delete(d.errs, a.LUID)
		out = append(out, a)
	}
	return out, nil
}

func (d *d3dkmt) Use(pid int, a Adapter) (AdapterUse, error) {
	if err := d.errs[a.LUID]; err != nil {
		return AdapterUse{}, fmt.Errorf("the adapter's nodes and segments: %w", err)
	}
	h, err := windows.OpenProcess(windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(pid))
	if err != nil {
		if errors.Is(err, windows.ERROR_INVALID_PARAMETER) {
			return AdapterUse{}, ErrGone
		}
		return AdapterUse{}, fmt.Errorf("OpenProcess: %w", err)
	}
	defer windows.CloseHandle(h)
	c := d.counts[a.LUID]
	var u AdapterUse
	s := queryStatistics{luidLow: uint32(a.LUID), luidHigh: int32(uint32(a.LUID >> 32)), process: h}
	for node := range c[0] {
		s.typ, s.queryID, s.result = statsProcessNode, uint32(node), [776]byte{}
		if err := call(procQueryStatistic, unsafe.Pointer(&s)); err != nil {
			return AdapterUse{}, fmt.Errorf("node %d: %w", node, err)
		}
		// 100 ns units; a figure past 2^63 ns is garbage
		if t := int64(d3dLE64(s.result[resultRunningTime:])); t > 0 && t < 1<<56 {
			u.RunningNS += t * 100
		}
	}
	for seg := range c[1] {
		s.typ, s.queryID, s.result = statsProcessSegment, uint32(seg), [776]byte{}
		if err := call(procQueryStatistic, unsafe.Pointer(&s)); err != nil {
			return AdapterUse{}, fmt.Errorf("segment %d: %w", seg, err)
		}
		if b := int64(d3dLE64(s.result[resultBytesCommitted:])); b > 0 && b < 1<<50 {
			u.MemoryBytes += b
		}
	}
	return u, nil
}

func d3dLE32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

func d3dLE64(b []byte) uint64 { return uint64(d3dLE32(b)) | uint64(d3dLE32(b[4:]))<<32 }
