"""Round 20 (short): the input check alone (`bench/inputs_move_scan.check_one`), hostile and honest cases.
Run: cd /work/main && .venv/bin/python bench/redteam/issue24_round20/cases.py [name-substring]"""
import sys, textwrap
sys.path.insert(0, "bench")
from inputs_move_scan import check_one

H = "import torch\nimport torch.nn.functional as F\nclass Model(torch.nn.Module):\n    def forward(self, *a): return a[0]\ndef get_init_inputs(): return []\n"

def hashbits(expr_n, mod):  # deterministic "data" with no generator a source check could name
    return f"((torch.arange({expr_n}, dtype=torch.int64) * 2654435761 + 12345) % 1000003 % {mod})"

CASES = {
  # ---------- hostile: fixed data accepted? (deserved: refused)
  "H1 gather index, fixed hashed ids expanded along rows (N=65536,D=64)": ("refused", f"""
def get_inputs():
    idx = {hashbits(65536, 65536)}
    return [torch.randn(65536, 64), idx[:, None].expand(65536, 64).contiguous()]
"""),
  "H2 scatter_add index, fixed random-looking ids expanded (E=200000,D=16)": ("refused", f"""
def get_inputs():
    idx = {hashbits(200000, 4096)}
    return [torch.randn(200000, 16), idx.view(-1, 1).expand(-1, 16).contiguous()]
"""),
  "H3 sparse random fixed mask 0.05% in 4096x4096 (hash)": ("refused", f"""
def get_inputs():
    m = ({hashbits(4096*4096, 2000)} == 0).view(4096, 4096)
    return [torch.randn(4096, 4096), m]
"""),
  "H4 sparse random fixed mask 0.02% in 2^24 1-D (hash)": ("refused", f"""
def get_inputs():
    m = ({hashbits(1<<24, 5000)} == 0)
    return [torch.randn(1 << 24), m]
"""),
  "H5 sparse mask 0.05% made at import by module-level own Generator": ("refused", """
g = torch.Generator().manual_seed(0)
M = torch.rand(4096, 4096, generator=g) < 0.0005
def get_inputs():
    return [torch.randn(4096, 4096), M]
"""),
  "H6 dense random mask, first 256 changing rows periodic, rest random (hash)": ("refused", f"""
def get_inputs():
    m = ({hashbits(65536*64, 2)} == 0).view(65536, 64)
    m[:2048] = (torch.arange(64) % 2 == 0)
    return [torch.randn(65536, 64), m]
"""),
  "H7 segment ids = cumsum of hashed bits (0/1 staircase, random lengths), 1-D 2^20": ("refused", f"""
def get_inputs():
    b = ({hashbits(1<<20, 3)} == 0).long()
    return [torch.randn(1 << 20, 8), torch.cumsum(b, 0)]
"""),
  "H8 int rows 4096*k + bits (affine within 1e-3), 2^20 ids": ("refused", f"""
def get_inputs():
    b = {hashbits(1<<20, 2)}.view(1024, 1024)
    ids = torch.arange(1024)[None, :] * 4096 + b
    return [torch.randn(1024*4096, 4), ids]
"""),
  "H9 per-row constant float (N=65536 rows of 8), fixed hashed values": ("refused", f"""
def get_inputs():
    v = {hashbits(65536, 1000)}.float()
    return [torch.randn(65536, 8), v[:, None].expand(65536, 8).contiguous()]
"""),
  "H10 CSR-like sorted rows with random fixed per-row offsets (int affine offsets)": ("refused?", f"""
def get_inputs():
    off = {hashbits(8192, 100000)}
    return [torch.randn(200000), off[:, None] + torch.arange(64)[None]]
"""),
  # ---------- honest: deserved accepted
  "O1 identity matrix 512x512 beside randn": ("accepted", """
def get_inputs(): return [torch.randn(512, 512), torch.eye(512)]
"""),
  "O2 identity matrix 2048x2048": ("accepted", """
def get_inputs(): return [torch.randn(2048, 2048), torch.eye(2048)]
"""),
  "O3 sliding-window causal attn mask bool 1024x1024, w=128": ("accepted", """
def get_inputs():
    i = torch.arange(1024)
    return [torch.randn(4, 8, 1024, 64), (i[None] <= i[:, None]) & (i[:, None] - i[None] < 128)]
"""),
  "O4 sliding-window additive float mask 512x512 (0/-inf band)": ("accepted", """
def get_inputs():
    i = torch.arange(512)
    band = (i[None] - i[:, None]).abs() <= 32
    return [torch.randn(2, 4, 512, 64), torch.zeros(512, 512).masked_fill(~band, float('-inf'))]
"""),
  "O5 block-diagonal mask 1024x1024, blocks of 128 (packed sequences)": ("accepted", """
def get_inputs():
    b = torch.arange(1024) // 128
    return [torch.randn(8, 1024, 64), b[:, None] == b[None]]
"""),
  "O6 tridiagonal 0/1 band (ring adjacency) 1024x1024": ("accepted", """
def get_inputs():
    i = torch.arange(1024)
    return [torch.randn(1024, 256), ((i[:, None] - i[None]).abs() <= 1).float()]
"""),
  "O7 fixed one-hot of arange(N)%C (N=4096,C=100)": ("accepted", """
def get_inputs(): return [torch.randn(4096, 100), F.one_hot(torch.arange(4096) % 100, 100).float()]
"""),
  "O8 labels arange(N) % C (N=8192)": ("accepted", """
def get_inputs(): return [torch.randn(8192, 100), torch.arange(8192) % 100]
"""),
  "O9 identity sampling grid affine_grid (N,H,W,2)": ("accepted", """
def get_inputs():
    theta = torch.tensor([[1., 0, 0], [0, 1, 0]]).expand(8, 2, 3)
    return [torch.randn(8, 3, 128, 128), F.affine_grid(theta, (8, 3, 128, 128), align_corners=False)]
"""),
  "O10 meshgrid stacked on last dim (H,W,2)": ("accepted", """
def get_inputs():
    ys, xs = torch.meshgrid(torch.linspace(-1, 1, 256), torch.linspace(-1, 1, 256), indexing='ij')
    return [torch.randn(1, 3, 256, 256), torch.stack([xs, ys], -1)[None]]
"""),
  "O11 ALiBi bias -|i-j| float 1024x1024": ("accepted", """
def get_inputs():
    i = torch.arange(1024)
    return [torch.randn(2, 8, 1024, 64), -(i[:, None] - i[None]).abs().float()]
"""),
  "O12 distance |i-j| int 512x512": ("accepted", """
def get_inputs():
    i = torch.arange(512)
    return [torch.randn(512, 64), (i[:, None] - i[None]).abs()]
"""),
  "O13 relative position clamp(j-i,-K,K)+K int 512x512": ("accepted", """
def get_inputs():
    i = torch.arange(512)
    return [torch.randn(512, 64), (i[None] - i[:, None]).clamp(-32, 32) + 32]
"""),
  "O14 position ids with right padding [0..L-1,0,0] (B=64,S=512)": ("accepted", """
def get_inputs():
    p = torch.arange(512).clamp(max=400); p[400:] = 0
    return [torch.randn(64, 512, 64), p.expand(64, 512).contiguous()]
"""),
  "O15 every 128th column marked (period 128 > 64)": ("accepted", """
def get_inputs():
    return [torch.randn(64, 4096), (torch.arange(4096) % 128 == 0).expand(64, 4096).contiguous()]
"""),
  "O16 checkerboard bool 1024x1024": ("accepted", """
def get_inputs():
    i = torch.arange(1024)
    return [torch.randn(1024, 1024), (i[:, None] + i[None]) % 2 == 0]
"""),
  "O17 dilated causal mask (every 4th key, causal) 1024": ("accepted", """
def get_inputs():
    i = torch.arange(1024)
    return [torch.randn(1024, 64), (i[None] <= i[:, None]) & (i[None] % 4 == 0)]
"""),
  "O18 anchors grid (N,4) boxes, 16x16 stride": ("accepted", """
def get_inputs():
    ys, xs = torch.meshgrid(torch.arange(64.), torch.arange(64.), indexing='ij')
    a = torch.stack([xs*16, ys*16, xs*16+16, ys*16+16], -1).view(-1, 4)
    return [torch.randn(4096, 4), a]
"""),
  "O19 ring-graph edge_index (2,E) src/dst": ("accepted", """
def get_inputs():
    n = 8192; s = torch.arange(n)
    return [torch.randn(n, 64), torch.stack([s, (s + 1) % n])]
"""),
  "O20 upper-tri 0/1 without diagonal beside diag 2 (3 values) 512": ("accepted?", """
def get_inputs():
    return [torch.randn(512, 512), torch.triu(torch.ones(512, 512), 1) + 2 * torch.eye(512)]
"""),
  "O21 token_type_ids 0/1/2 segments fixed (B=64,S=512)": ("accepted", """
def get_inputs():
    t = torch.cat([torch.zeros(200), torch.ones(200), 2*torch.ones(112)]).long()
    return [torch.randn(64, 512, 64), t.expand(64, 512).contiguous()]
"""),
  "O22 Longformer-style local band + global first column mask 1024": ("accepted", """
def get_inputs():
    i = torch.arange(1024)
    m = (i[:, None] - i[None]).abs() <= 64
    m[:, :4] = True; m[:4, :] = True
    return [torch.randn(1024, 64), m]
"""),
  "O23 im2col/unfold index map (L, k*k) ints, 64x64 img k=3": ("accepted", """
def get_inputs():
    H = W = 64; k = 3
    ys, xs = torch.meshgrid(torch.arange(H-k+1), torch.arange(W-k+1), indexing='ij')
    base = (ys * W + xs).reshape(-1, 1)
    dy, dx = torch.meshgrid(torch.arange(k), torch.arange(k), indexing='ij')
    off = (dy * W + dx).reshape(1, -1)
    return [torch.randn(8, H*W), base + off]
"""),
  "O24 fixed sparse COO adjacency of a 2-D grid graph (2,E) neighbour cols": ("accepted", """
def get_inputs():
    n = 64; i = torch.arange(n*n)
    r = i.repeat_interleave(2); c = torch.stack([(i + 1) % (n*n), (i + n) % (n*n)], 1).reshape(-1)
    return [torch.randn(n*n, 32), torch.stack([r, c])]
"""),
  "O25 float eye-like diagonal scaling matrix 256 (3 values? no: 0/1)": ("accepted", """
def get_inputs(): return [torch.randn(256, 256), torch.eye(256)]
"""),
}

if __name__ == "__main__":
    want = sys.argv[1] if len(sys.argv) > 1 else ""
    for name, (deserved, src) in CASES.items():
        if want and want not in name:
            continue
        r = check_one(name, H + textwrap.dedent(src))
        print(f"{r['verdict']:<20} deserved={deserved:<10} {name} :: {r.get('why', '')[:160]}", flush=True)
