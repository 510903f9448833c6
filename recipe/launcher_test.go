package recipe

import "testing"

func TestLauncherOfCommand(t *testing.T) {
	for cmd, want := range map[string]Launcher{
		"torchrun --nproc-per-node 8 pretrain_gpt.py --log-interval 1 {flags}": LauncherMLM,
		"srun python /opt/Megatron-LM/pretrain_gpt.py {flags}":                 LauncherMLM,
		"python 'pretrain_gpt.py' {flags}":                                     LauncherMLM,
		"srun python run_recipe.py --recipe llama3_8b_pretrain {dotlist}":      LauncherMB,
		"python scripts/performance/run_script.py {run_script_flags}":          LauncherMB,
		"python my_pretrain_gpt.py.bak {flags}":                                LauncherMB,
		"python examples/pretrain_gpt.py.orig; python run_recipe.py {dotlist}": LauncherMB,
		"torchrun pretrain_gpt.py; echo done":                                  LauncherMLM,
	} {
		if got := LauncherOf(cmd); got != want {
			t.Errorf("LauncherOf(%q) = %s, want %s", cmd, got, want)
		}
	}
}

func TestParseLauncher(t *testing.T) {
	for _, l := range Launchers {
		if got, err := ParseLauncher(string(l)); err != nil || got != l {
			t.Errorf("ParseLauncher(%q) = %q, %v", l, got, err)
		}
	}
	if _, err := ParseLauncher("torchrun"); err == nil || err.Error() != `unknown launcher "torchrun" (allowed: mb, mlm)` {
		t.Errorf("ParseLauncher(torchrun): %v", err)
	}
}
