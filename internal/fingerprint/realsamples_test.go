package fingerprint

import (
	"os"
	"path/filepath"
	"testing"
)

// The published amd-smi static --json of ROCm 7 (testdata/real-samples; its README names
// the source and license) is read the way it is: the gpu_data wrapper, no partition
// section, a driver string without spaces, fields amd-smi does not know. Every field opx
// takes from it is the file's; what it does not report stays unknown ("" or 0), and its
// placeholder serial "0" is no serial.
func TestRealAMDSMIStatic(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "real-samples", "amd-smi-static-devicemetricsexporter-mi210.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f Fingerprint
	if err := readAMD(&f, b, nil, ""); err != nil {
		t.Fatal(err)
	}
	const driver = "Linuxversion6.14.0-24-generic(buildd@lcy02-amd64-010)(x86_64-linux-gnu-gcc-13(Ubuntu13.3.0-6ubuntu2~24.04)13.3.0,GNUld(GNUBinutilsforUbuntu)2.42)#24~24.04.3-UbuntuSMPPREEMPT_DYNAMICMonJul716:39:17UTC2"
	if f.Vendor != "amd" || f.Driver != driver || len(f.GPUs) != 1 {
		t.Fatalf("vendor %q driver %q, %d GPUs", f.Vendor, f.Driver, len(f.GPUs))
	}
	want := GPU{Index: 0, Model: "AMD Instinct MI210", PowerLimitW: 300, ECC: "Enabled", MaxSMMHz: 1700}
	g := f.GPUs[0]
	if g.Index != want.Index || g.Model != want.Model || g.PowerLimitW != want.PowerLimitW || g.ECC != want.ECC || g.MaxSMMHz != want.MaxSMMHz ||
		g.Serial != "" || g.UUID != "" || g.MIG != "" || g.SMClockMHz != 0 || g.PowerDrawW != 0 || g.TemperatureC != 0 {
		t.Errorf("the MI210:\n got %+v\nwant %+v (no serial, UUID, partition or live readings: the file has none)", g, want)
	}
}
