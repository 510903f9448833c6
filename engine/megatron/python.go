package megatron

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"cgtune/engine"
)

// PythonEnv names the variable that picks the Python interpreter when
// --python is not given.
const PythonEnv = "CGTUNE_PYTHON"

// FindPython picks the interpreter: the flag's value, then $CGTUNE_PYTHON,
// then python3 on PATH.
func FindPython(flag string) (string, error) {
	for _, p := range []string{flag, os.Getenv(PythonEnv)} {
		if p == "" {
			continue
		}
		path, err := exec.LookPath(p)
		if err != nil {
			return "", fmt.Errorf("python %q: %w", p, err)
		}
		return path, nil
	}
	path, err := exec.LookPath("python3")
	if err != nil {
		return "", errors.New("no python3 on PATH (give --python PATH or $" + PythonEnv + ")")
	}
	return path, nil
}

// Framework is what the node's Python can import.
type Framework struct {
	Python string   `json:"python"`
	Torch  string   `json:"torch"`
	CUDA   bool     `json:"cuda"`  // torch was built with CUDA and sees a device
	MCore  string   `json:"mcore"` // megatron.core version, "" when not importable
	TE     string   `json:"te"`    // transformer_engine version, "" when not importable
	Errors []string `json:"errors,omitempty"`
}

// Usable reports whether the megatron engine can run, and if not, what is
// missing, in words.
func (f Framework) Usable() (bool, string) {
	var miss []string
	if f.Torch == "" {
		miss = append(miss, "torch")
	} else if !f.CUDA {
		miss = append(miss, "a CUDA device visible to torch "+f.Torch)
	}
	if f.MCore == "" {
		miss = append(miss, "megatron.core")
	}
	if len(miss) == 0 {
		return true, ""
	}
	why := "not importable with " + f.Python + ": " + strings.Join(miss, ", ")
	if len(f.Errors) > 0 {
		why += " (" + strings.Join(f.Errors, "; ") + ")"
	}
	return false, why
}

// LayerSpec is the layer spec the worker builds with this framework.
func (f Framework) LayerSpec() string {
	if f.TE != "" {
		return "transformer_engine"
	}
	return "local"
}

func (f Framework) String() string {
	return Describe(&engine.FrameworkInfo{Torch: f.Torch, MCore: f.MCore, TE: f.TE, LayerSpec: f.LayerSpec()})
}

// Describe names a framework in one line: versions and layer spec.
func Describe(fw *engine.FrameworkInfo) string {
	te := "no Transformer Engine"
	if fw.TE != "" {
		te = "transformer_engine " + fw.TE
	}
	return fmt.Sprintf("megatron-core %s, torch %s, %s (%s layer spec)", fw.MCore, fw.Torch, te, fw.LayerSpec)
}

// checkScript imports what the worker needs and prints one JSON line. It
// asks NVML for the device count, so this probe never creates a CUDA
// context.
const checkScript = `
import json, os, sys
os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
r = {"python": sys.executable, "torch": "", "cuda": False, "mcore": "", "te": "", "errors": []}
try:
    import torch
    r["torch"] = torch.__version__
    r["cuda"] = bool(torch.version.cuda) and torch.cuda.device_count() > 0
except Exception as e:
    r["errors"].append("torch: %s" % e)
try:
    import megatron.core
    r["mcore"] = getattr(megatron.core, "__version__", "unknown")
except Exception as e:
    r["errors"].append("megatron.core: %s" % " ".join(str(e).split())[:200])
try:
    import transformer_engine
    r["te"] = getattr(transformer_engine, "__version__", "unknown")
except Exception:
    pass
print(json.dumps(r))
`

// Check asks python what it can import (torch with CUDA, megatron.core,
// transformer_engine). Importing megatron.core takes 10–15 s.
func Check(ctx context.Context, python string) (Framework, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, python, "-B", "-c", checkScript).Output()
	var f Framework
	if jerr := json.Unmarshal(lastLine(out), &f); jerr != nil {
		if err == nil {
			err = jerr
		}
		return Framework{Python: python}, fmt.Errorf("%s could not be asked what it imports: %w", python, err)
	}
	return f, nil
}

func lastLine(b []byte) []byte {
	s := strings.TrimSpace(string(b))
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return []byte(s)
}
