package history

import "testing"

func TestCaseName(t *testing.T) {
	for key, want := range map[string]string{
		`cpu_smoke | gemm | {"a": {"dtype": "fp32"}, "b": {"dtype": "fp32"}, "k": 128, "m": 128, "n": 128, "out": "fp32"} | cpu | ws=1 | local@vm`: "gemm 128×128×128 fp32 · cpu · ws=1 · local@vm",
		`t | gemm | {"a": {"dtype": "bf16"}, "b": {"dtype": "bf16"}, "k": 4096, "m": 1, "n": 8192, "out": "fp32"} | vllm | ws=1 | h200_dgxc_8x`:    "gemm 1×8192×4096 bf16×bf16→fp32 · vllm · ws=1 · h200_dgxc_8x",
		`t | gemm | {"a": {"dtype": "fp32"}, "b": {"dtype": "fp16"}, "k": 128, "m": 128, "n": 128, "out": "fp16"} | cpu | ws=1 | local@vm`:         "gemm 128×128×128 fp32×fp16→fp16 · cpu · ws=1 · local@vm",
		`t | gemm | {"a": {"dtype": "fp32"}, "b": {"dtype": "fp32"}, "k": 128, "m": 128, "n": 128, "out": "fp16"} | cpu | ws=1 | local@vm`:         "gemm 128×128×128 fp32×fp32→fp16 · cpu · ws=1 · local@vm",
		`t | allreduce | {"bytes": 1048576, "dtype": "bf16"} | nccl | ws=8 | h100_dsxe_8x`:                                                         "allreduce bytes=1048576 dtype=bf16 · nccl · ws=8 · h100_dsxe_8x",
		"not a key":                          "not a key",
		`t | op | {not json} | b | ws=1 | c`: `t | op | {not json} | b | ws=1 | c`,
	} {
		if got := CaseName(key); got != want {
			t.Errorf("CaseName(%s) = %q, want %q", key, got, want)
		}
	}
}
