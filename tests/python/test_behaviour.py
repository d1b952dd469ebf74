"""What a Python user expects beyond the numbers: exceptions with the engine's message and
never a crash, two threads on one model, flat memory over many calls, the preprocessing of
`vit predict` bit for bit, docstrings, and the example script."""
import os
import shutil
import subprocess
import sys
import threading

import numpy as np
import pytest

import vitcpp
from conftest import HERE, PRETRAINED, read_safetensors, run_vit

TIMM_A = os.path.join(PRETRAINED, "timm_a")


@pytest.fixture(scope="module")
def model():
    return vitcpp.create_model("local-dir:" + TIMM_A)


def test_bad_inputs_raise_the_right_exception(model):
    with pytest.raises(ValueError, match=r"takes images \[N, 3, 32, 32\].*got \[3, 32, 32\]"):
        model(np.zeros((3, 32, 32), np.float32))
    with pytest.raises(ValueError, match=r"got \[1, 3, 24, 32\]"):
        model(np.zeros((1, 3, 24, 32), np.float32))
    with pytest.raises(TypeError, match="floating point"):
        model(np.zeros((1, 3, 32, 32), np.uint8))
    with pytest.raises(TypeError, match="floating point.*got dtype <U"):
        model("not an image")
    with pytest.raises(ValueError, match="forward_head takes"):
        model.forward_head(np.zeros((1, 5), np.float32))


def test_an_empty_batch_gives_empty_outputs_as_torch(model):
    """N = 0 was a ValueError; timm answers [0, K] (a filtered batch can be empty)."""
    x = np.zeros((0, 3, 32, 32), np.float32)
    assert model(x).shape == (0, model.num_classes)
    T, D = model.num_prefix_tokens + 16, model.num_features
    assert model.forward_features(x).shape == (0, T, D)
    assert model.forward_head(model.forward_features(x)).shape == (0, model.num_classes)
    assert model.forward_head(model.forward_features(x), pre_logits=True).shape == (0, D)
    assert [f.shape for f in model.forward_intermediates(x, intermediates_only=True)] == [(0, D, 4, 4)] * 2
    torch = pytest.importorskip("torch")
    y = model(torch.zeros(0, 3, 32, 32))
    assert isinstance(y, torch.Tensor) and tuple(y.shape) == (0, model.num_classes)


def test_bad_files_raise_with_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        vitcpp.create_model("local-dir:" + str(tmp_path / "missing"))
    bad = tmp_path / "bad"
    shutil.copytree(TIMM_A, bad)
    with open(bad / "model.safetensors", "r+b") as f:  # a truncated checkpoint
        f.truncate(1000)
    with pytest.raises(vitcpp.Error, match="model.safetensors") as e:
        vitcpp.create_model("local-dir:" + str(bad))
    assert isinstance(e.value, RuntimeError)
    with pytest.raises(vitcpp.Error, match="nearest|unknown|preset"):
        vitcpp.create_model("vit_tinny_patch16_224")
    with pytest.raises(ValueError, match="no model hub"):
        vitcpp.create_model("vit_tiny_patch16_224", pretrained=True)
    with pytest.raises(TypeError, match="qkv_norm"):  # timm's, not built here: refused by name
        vitcpp.create_model("mnist-seed", qkv_norm=True)
    with pytest.raises(ValueError, match="PatchDropout is not implemented"):
        vitcpp.create_model("mnist-seed", patch_drop_rate=0.5)
    with pytest.raises(ValueError, match=r"drop_path_rate must be a rate in \[0, 1\), got 1.5"):
        vitcpp.create_model("mnist-seed", drop_path_rate=1.5)
    t = vitcpp.data.create_transform(input_size=(3, 32, 32))
    with pytest.raises(FileNotFoundError):
        t(str(tmp_path / "none.png"))
    with pytest.raises(vitcpp.Error, match="encoded image"):
        t(b"\x89PNG not really")


def test_file_names_that_are_not_utf8_open_and_errors_keep_their_text(model, tmp_path):
    """Python hands such names over as str with surrogate escapes: pybind11 refused them
    ("incompatible function arguments"), and an error quoting them arrived empty."""
    name = os.fsdecode(b"ok\xfe")
    ck = tmp_path / (name + "_ck")
    shutil.copytree(TIMM_A, ck)
    png = os.path.join(PRETRAINED, "images", "coffee.png")
    img = tmp_path / (name + ".png")
    shutil.copy(png, img)
    m = vitcpp.create_model(str(ck))
    assert m.predict([str(img)]) == model.predict([png])
    (tmp_path / (name + ".jpg")).write_bytes(b"not an image")
    with pytest.raises(vitcpp.Error) as e:
        m.predict([str(tmp_path / (name + ".jpg"))])
    assert "ok\ufffd.jpg: not a PNG or JPEG file" in str(e.value)
    m.save_pretrained(str(tmp_path / (name + "_saved")))
    assert os.path.exists(tmp_path / (name + "_saved") / "model.safetensors")


def test_a_seed_outside_uint64_is_refused_not_wrapped():
    """-1 became 2**64 - 1 (or a pybind11 TypeError), 1.5 became 1, as vit train's --seed
    took -1 and 2**64 for 2**64 - 1; torch.manual_seed refuses them."""
    for bad in (-1, 2**64, 1.5, "3"):
        with pytest.raises(ValueError, match=r"seed must be an int in \[0, 2\*\*64 - 1\]"):
            vitcpp.create_model("mnist-seed", seed=bad)
    a = vitcpp.create_model("mnist-seed", seed=2**64 - 1)
    b = vitcpp.create_model("mnist-seed", seed=42)
    assert not np.array_equal(a.state_dict()["patch_embed.proj.weight"], b.state_dict()["patch_embed.proj.weight"])
    # vit train's seed (42) by default: train(create_model(name)) starts where train(name) does
    assert np.array_equal(vitcpp.create_model("mnist-seed").state_dict()["patch_embed.proj.weight"],
                          b.state_dict()["patch_embed.proj.weight"])


def test_the_transform_is_vit_predicts_preprocessing_bit_for_bit(model):
    """preprocess.safetensors: timm's eval transform of each photo (PyTorch); vitcpp's C++ tests
    hold `vit predict`'s tensors to it within 1e-5. Here: the same C++ pixels from a path, bytes
    or a decoded array, and within 1e-5 of timm's."""
    from PIL import Image
    want = read_safetensors(os.path.join(PRETRAINED, "preprocess.safetensors"))
    t = vitcpp.data.create_transform(**vitcpp.data.resolve_model_data_config(model))
    for stem, name in [("cat", "cat.jpg"), ("coffee", "coffee.png"), ("cat_rgba", "cat_rgba.png")]:
        path = os.path.join(PRETRAINED, "images", name)
        x = t.numpy(path)
        assert x.dtype == np.float32 and x.shape == (3, 32, 32)
        assert np.array_equal(t.numpy(open(path, "rb").read()), x)
        assert np.array_equal(t.numpy(Image.open(path)), x)
        assert np.abs(x - want[f"timm_a.{stem}"]).max() <= 1e-5


def test_two_threads_share_one_model(model):
    rng = np.random.default_rng(1)
    xs = [rng.standard_normal((2, 3, 32, 32)).astype(np.float32) for _ in range(8)]
    want = [model(x) for x in xs]
    got, errors = [None] * len(xs), []

    def work(i0):
        try:
            for _ in range(5):
                for i in range(i0, len(xs), 2):
                    got[i] = model(xs[i])
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors
    for g, w in zip(got, want):
        assert np.array_equal(g, w)


def rss_kib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def test_a_thousand_calls_leave_memory_flat(model):
    x = np.random.default_rng(2).standard_normal((4, 3, 32, 32)).astype(np.float32)
    for _ in range(50):  # warm-up: arenas, thread pools
        model(x)
    before = rss_kib()
    for _ in range(1000):
        model(x)
        model.forward_features(x)
    grown = rss_kib() - before
    assert grown < 2048, f"resident memory grew by {grown} KiB over 1000 calls"


def test_public_callables_have_docstrings():
    for f in (vitcpp.create_model, vitcpp.list_models, vitcpp.VisionTransformer.forward,
              vitcpp.VisionTransformer.forward_features, vitcpp.VisionTransformer.forward_head,
              vitcpp.VisionTransformer.predict, vitcpp.VisionTransformer.attention_maps,
              vitcpp.VisionTransformer.save_pretrained, vitcpp.data.create_transform,
              vitcpp.data.resolve_model_data_config, vitcpp.backend_info):
        assert f.__doc__ and len(f.__doc__) > 40, f.__name__
    package = os.path.dirname(vitcpp.__file__)
    assert os.path.exists(os.path.join(package, "__init__.pyi")) and os.path.exists(os.path.join(package, "py.typed"))


def test_backend_info_says_what_vit_info_says():
    info = vitcpp.backend_info()
    text = run_vit("info")
    assert f"isa: {info['isa']} (best on this CPU: {info['isa_detected']};" in text, (info, text)
    assert f"matrix products: {info['matrix_products']}\n" in text, (info, text)
    assert ("bf16 products: oneDNN's" in text) == info["bf16"], (info, text)
    assert ("oneDNN emulates bf16" not in text) == (info["bf16_native"] or not info["bf16"]), (info, text)
    assert f"int8 products: {info['int8_product']} (" in text, (info, text)
    # With AMX the layers narrower than its tiles run another product, which vit info names.
    narrow = info["int8_narrow_product"]
    assert (f"layers narrower than 64: {narrow})" in text) == (info["int8_product"] == "amx"), (info, text)
    assert narrow == info["int8_product"] or info["int8_product"] == "amx", info
    assert info["int8_dot_product"] == (info["int8_product"] in ("amx", "avx512-vnni", "avx-vnni", "neon-dotprod")), info
    assert info["threads"] == vitcpp.get_threads()


def fresh_python(*args, cwd=None, **env_vars):
    """python3 ARGS in a new interpreter that imports this vitcpp (env_vars added to its
    environment, those set to None taken out): the finished process."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(vitcpp.__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([package] + sys.path), **env_vars)
    env = {k: v for k, v in env.items() if v is not None}
    return subprocess.run([sys.executable, *map(str, args)], capture_output=True, text=True, cwd=cwd, env=env)


# oneDNN held to AVX512_CORE emulates bf16, as on CPUs without AVX512-BF16 or AMX, where it is
# slower than float32: create_model(dtype="bfloat16") says so, and backend_info() has it.
EMULATED_BF16_SCRIPT = """
import warnings, vitcpp
assert vitcpp.backend_info()["bf16"] and not vitcpp.backend_info()["bf16_native"], vitcpp.backend_info()
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    m = vitcpp.create_model("mnist-seed", dtype="bfloat16")
assert len(w) == 1 and w[0].category is RuntimeWarning and "oneDNN emulates bf16, slower than fp32" in str(w[0].message), [str(x.message) for x in w]
assert w[0].filename == "<string>", w[0].filename  # the caller's line
try:
    m.bfloat16()
    raise AssertionError("bfloat16() was taken")
except RuntimeError as e:
    assert "create_model(..., dtype='bfloat16')" in str(e), e
print("done")
"""


def test_emulated_bf16_warns_that_it_is_slower(tmp_path):
    if vitcpp.backend_info()["isa_detected"] != "avx512":
        pytest.skip("oneDNN's bf16 needs AVX-512")
    r = fresh_python("-c", EMULATED_BF16_SCRIPT, cwd=tmp_path, ONEDNN_MAX_CPU_ISA="AVX512_CORE")
    assert r.returncode == 0 and r.stdout.rstrip().endswith("done"), r.stdout[-2000:] + r.stderr[-2000:]


def test_the_classify_example_runs():
    example = os.path.join(HERE, "..", "..", "examples", "python", "classify.py")
    images = [os.path.join(PRETRAINED, "images", f) for f in ("cat.jpg", "coffee_32.png")]
    r = subprocess.run([sys.executable, example, TIMM_A, *images], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "cat.jpg: " in r.stdout and "%" in r.stdout and "logits (2, 5)" in r.stdout


# vitcpp keeps a thread count of its own. Both libraries use OpenMP, whose count is one per
# process, and importing Debian's PyTorch sets it to PyTorch's own (1 on some 2-core machines):
# before, vitcpp's calls then ran on that many threads. Run in a fresh process, PyTorch first.
THREADS_SCRIPT = """
import os, sys, torch
torch.set_num_threads(1)  # as importing PyTorch does on some machines
import vitcpp
env = os.environ.get("OMP_NUM_THREADS", "").split(",")[0]
default = int(env) if env.isdigit() and int(env) > 0 else len(os.sched_getaffinity(0))
assert vitcpp.get_threads() == default, (vitcpp.get_threads(), default)
assert vitcpp._vitcpp._compute_threads() == default
vitcpp.set_threads(3)
assert torch.get_num_threads() == 1, torch.get_num_threads()  # PyTorch's count is left alone
torch.set_num_threads(2)
assert vitcpp.get_threads() == 3 and vitcpp._vitcpp._compute_threads() == 3
m = vitcpp.create_model("mnist-seed")
m(__import__("numpy").zeros((2, 1, 28, 28), "float32"))
vitcpp.train("mnist-seed", synthetic=64, epochs=1, batch_size=64, progress="log")  # prints its threads
vitcpp.train("mnist-seed", synthetic=64, epochs=1, batch_size=64, progress="log", threads=4)
assert torch.get_num_threads() == 2 and vitcpp.get_threads() == 3, (torch.get_num_threads(), vitcpp.get_threads())
vitcpp.set_threads(0)
assert vitcpp.get_threads() == default
try:
    vitcpp.set_threads(5000)
    raise AssertionError("set_threads(5000) was taken")
except ValueError as e:
    assert "at most 4096" in str(e), e
assert vitcpp.get_threads() == default
print("done")
"""


def test_threads_are_vitcpps_own_whatever_pytorch_sets(tmp_path):
    pytest.importorskip("torch")
    r = fresh_python("-c", THREADS_SCRIPT, cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.rstrip().endswith("done"), r.stdout[-2000:] + r.stderr[-2000:]
    assert [line.rsplit("threads: ", 1)[1] for line in r.stdout.splitlines()
            if line.startswith("vit train:")] == ["3", "4"], r.stdout[-2000:]


# vitcpp's OpenMP threads spin briefly between parallel regions, as vit's (OMP_WAIT_POLICY=ACTIVE
# GOMP_SPINCOUNT=2000): libgomp's default made vitcpp.train 1.5-1.8x slower with another
# process on the second core. Set as libgomp loads, then taken out of the environment (child
# processes do not inherit it); a wait policy the environment sets is kept.
WAIT_POLICY_SCRIPT = """
import ctypes, os, vitcpp
gomp = ctypes.CDLL("libgomp.so.1")
if not hasattr(gomp, "omp_display_env"):
    print("no omp_display_env")
else:
    gomp.omp_display_env(1)  # OpenMP 5.1: the settings libgomp read, on stderr
print("environment:", os.environ.get("OMP_WAIT_POLICY"), os.environ.get("GOMP_SPINCOUNT"))
"""


def test_openmp_threads_spin_briefly_unless_the_environment_says(tmp_path):
    r = fresh_python("-c", WAIT_POLICY_SCRIPT, OMP_WAIT_POLICY=None, GOMP_SPINCOUNT=None)
    assert r.returncode == 0, r.stderr
    if "no omp_display_env" in r.stdout:
        pytest.skip("this libgomp has no omp_display_env")
    assert "OMP_WAIT_POLICY = 'ACTIVE'" in r.stderr and "GOMP_SPINCOUNT = '2000'" in r.stderr, r.stderr
    assert "environment: None None" in r.stdout, r.stdout
    passive = fresh_python("-c", WAIT_POLICY_SCRIPT, OMP_WAIT_POLICY="PASSIVE", GOMP_SPINCOUNT=None)
    assert "OMP_WAIT_POLICY = 'PASSIVE'" in passive.stderr, passive.stderr
    assert "environment: PASSIVE None" in passive.stdout, passive.stdout


# Under OMP_THREAD_LIMIT=1, threads=2 computed ViT-Ti's logits with parts of the products
# undone (OpenMP ran each region on fewer threads than asked): now they are threads=1's,
# and get_threads() says the count the calls run on.
LIMIT_SCRIPT = """
import sys, numpy as np, vitcpp
m = vitcpp.create_model("vit_tiny_patch16_224", threads=int(sys.argv[1]))
x = np.random.RandomState(0).rand(1, 3, 224, 224).astype(np.float32)
np.save(sys.argv[2], m(x))
print(vitcpp.get_threads())
"""


def test_openmps_thread_limit_holds_the_count_and_loses_no_work(tmp_path):
    one = fresh_python("-c", LIMIT_SCRIPT, 1, tmp_path / "one.npy")
    limited = fresh_python("-c", LIMIT_SCRIPT, 2, tmp_path / "limited.npy", OMP_THREAD_LIMIT="1")
    assert one.returncode == 0 and limited.returncode == 0, one.stderr + limited.stderr
    assert limited.stdout.split() == ["1"], limited.stdout
    np.testing.assert_array_equal(np.load(tmp_path / "limited.npy"), np.load(tmp_path / "one.npy"))


# Daemon threads still inside vitcpp when the program ends: one calling a model in a loop,
# one training. Before, Python's pthread_exit of such a thread, once it asked for the GIL back,
# unwound through vitcpp's frames into std::terminate: "terminate called without an active
# exception" and exit 134 after the program had finished (4 runs in 5 for the calls, 3 in 3
# for the training); and on the generic path, whose calls are slower, a call still computing
# at exit crashed once (SIGSEGV) in CI. Now the exit waits for the calls in flight (the
# training stops after its step) and the threads wait for the exit (python/src/gil.h).
DAEMON_SCRIPT = """
import sys, threading, time, numpy as np, vitcpp
m = vitcpp.create_model("mnist-seed")
x = np.zeros((2, 1, 28, 28), np.float32)
def calls():
    while True:
        m(x)
def training():
    vitcpp.train("mnist-seed", synthetic=256, epochs=100000, batch_size=64, progress="none")
for f in (calls, training):
    threading.Thread(target=f, daemon=True).start()
time.sleep(0.5)
sys.stdout.write("done\\n")  # one write: print's two (text, then end) let the run's line in between
"""


def test_daemon_threads_inside_vitcpp_let_the_program_exit(tmp_path):
    for _ in range(3):
        r = fresh_python("-c", DAEMON_SCRIPT, cwd=tmp_path)
        assert r.returncode == 0 and "done" in r.stdout.splitlines(), (r.returncode, r.stderr[-2000:], r.stdout[-500:])


def fork_child(model, x, q):
    try:
        logits = model(x)
        h = vitcpp.train("mnist-seed", synthetic=64, epochs=1, batch_size=32, progress="log")
        q.put((logits, vitcpp._vitcpp._compute_threads(), len(h)))
    except BaseException as e:  # noqa: BLE001 - reported to the parent
        q.put(repr(e))


def answer_of(p, q, hang):
    """What the child process p put on q, or `hang` after 60 s; the child is ended either way."""
    import queue
    try:
        return q.get(timeout=60)
    except queue.Empty:
        return hang
    finally:
        p.kill() if p.is_alive() else None
        p.join()


def test_a_forked_process_computes(model):
    """multiprocessing's fork (Linux's default start method), a prefork server: before, the
    child's first call waited forever for the parent's OpenMP threads, which fork() does not
    copy (PyTorch 1.13 hangs the same way). Now it runs on a helper thread, on every thread."""
    import multiprocessing
    x = np.random.default_rng(2).standard_normal((2, 3, 32, 32)).astype(np.float32)
    want = model(x)  # the parent's OpenMP threads start here (and in the fixture's load)
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=fork_child, args=(model, x, q))
    p.start()
    got = answer_of(p, q, "no answer in 60 s: the child hangs")
    assert not isinstance(got, str), got
    logits, threads, epochs = got
    assert np.array_equal(logits, want)
    assert threads == vitcpp.get_threads() and epochs == 1


def forked_call(model, x, q):
    q.put(model(x))


def test_a_fork_while_another_thread_calls_the_model_leaves_it_usable(model):
    """fork() copied the model's lock as it stood: held by the thread inside a call, it was held
    forever in the child, whose call on that model waited on it (every time)."""
    import multiprocessing
    import queue
    x = np.random.default_rng(3).standard_normal((8, 3, 32, 32)).astype(np.float32)
    want = model(x[:1])
    stop = threading.Event()

    def busy():
        while not stop.is_set():
            model(x)
    t = threading.Thread(target=busy)
    t.start()
    ctx = multiprocessing.get_context("fork")
    answers = []
    try:
        for _ in range(4):  # some forks land while the thread holds the lock
            q = ctx.Queue()
            p = ctx.Process(target=forked_call, args=(model, x[:1], q))
            p.start()
            try:
                answers.append(q.get(timeout=60))
            except queue.Empty:
                answers.append("no answer in 60 s: the child waits on the parent's lock")
            finally:
                p.kill() if p.is_alive() else None
                p.join()
    finally:
        stop.set()
        t.join()
    for got in answers:
        assert not isinstance(got, str), got
        assert np.array_equal(got, want)


def test_a_fork_while_another_thread_resamples_leaves_dynamic_sizes_usable():
    """A resample for dynamic_img_size holds the model's resize lock (tens of ms without the
    GIL): a fork then copied it held, and the child's next call at another size waited for it
    forever (11 of 12 children). Held here by the parent itself across the fork, every time."""
    import multiprocessing
    m = vitcpp.create_model("local-dir:" + os.path.join(PRETRAINED, "hf"), dynamic_img_size=True)
    x = np.random.default_rng(5).standard_normal((1, 3, 48, 64)).astype(np.float32)
    want = m(x)
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    with m._resize_lock:  # as the thread inside a resample holds it
        p = ctx.Process(target=forked_call, args=(m, x, q))
        p.start()
    got = answer_of(p, q, "no answer in 60 s: the child waits on the parent's resize lock")
    assert not isinstance(got, str), got
    assert np.array_equal(got, want)


@pytest.mark.parametrize("name,kw", [("timm_a", {}), ("timm_a", {"dtype": "int8"}), ("timm_a", {"num_classes": 0}),
                                     ("hf", {"dynamic_img_size": True})])
def test_a_model_pickles_to_the_same_bits(tmp_path, name, kw):
    """What multiprocessing's spawn, ProcessPoolExecutor and copy.deepcopy need (before: TypeError
    "cannot pickle 'vitcpp._vitcpp.Engine' object"). In a fresh interpreter, as spawn runs it."""
    import copy
    import pickle
    m = vitcpp.create_model("local-dir:" + os.path.join(PRETRAINED, name), **kw)
    x = np.random.default_rng(4).standard_normal((2, 3, 48, 64) if kw.get("dynamic_img_size") else (2, 3, 32, 32))
    x = x.astype(np.float32)
    forward = m.forward if m.num_classes else m.forward_pooled
    want = forward(x)
    weights = m.state_dict()
    for other in (pickle.loads(pickle.dumps(m)), copy.deepcopy(m)):
        f = other.forward if m.num_classes else other.forward_pooled
        assert np.array_equal(f(x), want)
        # an int8 model's fp32 weights too (the copy's were int8 times their scales)
        copied = other.state_dict()
        assert all(np.array_equal(copied[k], v) for k, v in weights.items()), kw
        assert (other.dtype, other.checkpoint_format, other.notes, other.class_names, other.pretrained_cfg,
                other.dynamic_img_size) == (m.dtype, m.checkpoint_format, m.notes, m.class_names,
                                            m.pretrained_cfg, m.dynamic_img_size)
    (tmp_path / "m.pkl").write_bytes(pickle.dumps(m))
    np.save(tmp_path / "x.npy", x)
    script = ("import pickle, sys, numpy as np; m = pickle.load(open(sys.argv[1], 'rb')); x = np.load(sys.argv[2]); "
              "np.save(sys.argv[3], m(x) if m.num_classes else m.forward_pooled(x))")
    r = fresh_python("-c", script, tmp_path / "m.pkl", tmp_path / "x.npy", tmp_path / "y.npy")
    assert r.returncode == 0, r.stderr[-2000:]
    assert np.array_equal(np.load(tmp_path / "y.npy"), want)
