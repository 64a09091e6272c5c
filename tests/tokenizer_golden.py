#!/usr/bin/env python3
"""Golden tokenizer tests: our `tokenize` tool against the reference libraries.

For every tokenizer under $HFQ_FIXTURES (tokenizers/llama3, qwen3, llama2 and
the models stories260K, TinyStories-656K) the same inputs are encoded by our
tool (in batch mode) and by the reference (Hugging Face `tokenizers` for
tokenizer.json, `sentencepiece` for tokenizer.model), like with like:

  plain    no BOS/EOS, special-token texts are plain text
           (HF: add_special_tokens=False, encode_special_tokens=True)
  special  --parse-special (HF: the default, added tokens are matched)
  bos      BOS/EOS as the vocabulary says (HF: add_special_tokens=True; for
           Llama 3, whose tokenizer.json has no template, BOS + plain ids)
  decode   our ids decoded by our tool against the reference's decode (control
           tokens skipped on both sides)
  dir      (with the GGUF helper) --tokenizer-dir against the GGUF, on the
           hand-made cases
  gguf-py  (llama3, qwen3, stories260K) the hand-made cases from a GGUF written with
           gguf-py the way llama.cpp's convert_hf_to_gguf.py writes it

Inputs: the whole text files, every distinct line of them, hand-made edge
cases (emoji, CJK, combining marks, digit runs, CR/LF, tabs, long whitespace,
invalid UTF-8, ...), every code point at the edges of the Unicode class and
combining-class tables, NFD forms of all decomposable characters, and seeded
random strings over a pool of tricky characters. Invalid UTF-8 goes to the
references with each invalid byte replaced by U+FFFD (our documented rule).

Usage: tokenizer_golden.py TOKENIZE_TOOL [GGUF_WRITER]
With a GGUF writer, every tokenizer is first written to a vocab-only GGUF and
our side runs from that file: `hfconv` (run as `hfconv DIR -o OUT
--vocab-only`).
Prints mismatch counts per tokenizer and mode with the first differing case;
exits 1 on any mismatch, 77 (skip) without fixtures.
"""
import codecs
import json
import os
import random
import subprocess
import sys
import tempfile
import unicodedata

FIX = os.environ.get('HFQ_FIXTURES', '')
SOURCE = os.environ.get('HFQ_SOURCE', os.path.join(os.path.dirname(__file__), '..'))


def per_byte_replace(exc):
    """Decode error handler: one U+FFFD per invalid byte (as sentencepiece / llama.cpp)."""
    return ('\ufffd' * (exc.end - exc.start), exc.end)


codecs.register_error('hfq_per_byte', per_byte_replace)


def as_text(b):
    return b.decode('utf-8', 'hfq_per_byte')


EDGE = [
    '', ' ', '  ', '\t', '\n', '\r\n', '\r', '\r\n\r\n', ' \n ', '\n\n\n', '   leading', 'trailing   ',
    'a  b   c    d', '\t\tindented\tcode', 'line1\nline2\r\nline3\rline4', ' \t \n \r\n  x',
    'Hello, world!', "It's I'M we'RE they'Ve he'LL she'D 'S ' s", "'\u017f 'ſt ſ x'ſx", "don't", "''quoted''",
    "'s'''t 'll'LL 'Ll", 'y\'all', '1', '12', '123', '1234', '12345678901234567890', '3.14159', '1,000,000',
    '\u00bd \u2153 \u00b2 \u2462 \u0663\u0664\u0665 \u096a\u0968', '\u216b', '\U0001F600', '\U0001F44D\U0001F3FD',
    '\U0001F468\u200d\U0001F469\u200d\U0001F467\u200d\U0001F466', '\U0001F1FA\U0001F1F8\U0001F1EF\U0001F1F5',
    'a\U0001F600b', ' \U0001F600 ', '\u4e2d\u6587\u5b57\u7b26\u6d4b\u8bd5',
    '\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8',
    '\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8', '\u4f60\u597d\uff0c\u4e16\u754c\uff01', 'e\u0301', 'a\u0308\u0304',
    '\u1100\u1161\u11a8', '\u212b', '\u0344', '\u00f1 vs n\u0303', 'q\u0307\u0323', '\u0958', 'a' + '\u0301' * 50,
    '\u0323\u0301' * 20, '\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645',
    '\u05e9\u05dc\u05d5\u05dd', '\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35\u0e04\u0e23\u0e31\u0e1a',
    '\u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e',
    '\u041f\u0440\u0438\u0432\u0435\u0442 \u043c\u0438\u0440',
    '\u0393\u03b5\u03b9\u03ac', '\u00a0', '\u3000', '\u2028', '\u0085', 'a\u00a0b', 'x\u2003\u2003y', '\x0b\x0c',
    '\x1c\x1d\x1e\x1f', 'a\x1cb', '\x00\x01\x07', '\x7f', 'a' * 1000, ' ' * 500, '\n' * 300, '!' * 200, 'ab' * 300,
    ' ' * 37 + 'x', '\t' * 9 + '\n' + ' ' * 4, '<s>', '</s>', '<unk>', '<|begin_of_text|>', '<|eot_id|> x',
    '<think>x</think>', '<tool_call>{"a": 1}</tool_call>', 'def f(x):\n    return x**2  # comment\n',
    'if (a && b) { c++; }', '{"key": [1, 2.5, "v"]}', 'https://example.com/a?b=c&d=e#f', 'user.name@mail.example.org',
    '\ufeffBOM', '\u200b zero width', '\ufffd', '\U0010ffff', '\U000e0001', '\ue000', '\U00031350', '\U00010d40',
    '\u1c89', "I'm 25 years old; my email is a.b@c.com\tand\r\nphone: +1 (555) 123-4567.",
    'The quick brown fox jumps over the lazy dog. THE QUICK BROWN FOX!', '  \u2581already\u2581escaped',
    '\u2581', '<0x41>', 'caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u00fcber', '$$$ %%% ^^^ ~~~ ```code```',
]
EDGE_BYTES = [b'\xff', b'a\xffb', b'\xe2\x82', b'\xe2\x82c', b'\xc0\x80', b'\xed\xa0\x80', b'\xf4\x90\x80\x80',
              b'\x80\x80', b'ok\xc3', b'\xf0\x9f\x98', b'\xf0\x9f\x98 x', b'\xfe\xfe\xff', b'a\xe0\x80\x80z']

# Texts with added tokens, for --parse-special.
SPECIAL_TEXTS = {
    'llama3': ['<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>',
               'a<|eot_id|>b <|end_of_text|> c', '<|reserved_special_token_5|><|reserved_special_token_50|>',
               '<|begin_of_text|', '<|eot_id|><|eot_id|>'],
    'qwen3': ['<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n',
              '<think>\nreasoning\n</think>\n\nanswer', '<|endoftext|>x<|im_end', ' <|vision_start|><|image_pad|> ',
              '<|fim_prefix|>def<|fim_suffix|>', '<tool_call>\n{"name": "f"}\n</tool_call>'],
    'llama2': ['<s>[INST] hello [/INST] hi</s>', 'a<s>b</s>c<unk>', '<s> <s>  </s>', '<<s>>'],
    'stories260K': ['<s>Once upon a time</s>', 'x <s> y'],
}

HAND_MADE = ('edge', 'invalid', 'run', 'random', 'classes')   # the subset for the extra modes
MAX_LINES = 1200   # distinct lines per text file (the whole files are cases too)

POOL = (list('abcXYZ019 _-.,!?\'"()') + ['\u017f', ' ', ' ', '  ', '\n', '\r', '\r\n', '\t', '\u00a0', '\u3000',
        '\u0301', '\u0308', '\u4e2d', '\u6587', '\U0001F600', '\u00e9', 'e\u0301', '\u0663', '\u00b2', '\u2028', '\x0b',
        "'s", "'T", "'re", "'LL", '\u1100', '\u1161', '\u11a8', '\uac00', '\ufffd', '\u0915', '\u094d', '\u0e01',
        '\u0e34'])


def class_edge_code_points():
    """Code points at the edges of our generated Unicode tables (and around them)."""
    import re
    text = open(os.path.join(SOURCE, 'src', 'tokenizer', 'unicode_tables.c')).read()
    body = text[text.index('hfq_ucd_class[]'):text.index('hfq_ucd_decomp_map[]')]
    cps = set()
    for lo, hi in re.findall(r'\{0x([0-9A-F]+),0x([0-9A-F]+),\d+\}', body):
        for c in (int(lo, 16) - 1, int(lo, 16), int(hi, 16), int(hi, 16) + 1):
            if 0 < c < 0x110000 and not 0xD800 <= c <= 0xDFFF:
                cps.add(c)
    return sorted(cps)


def vocab_texts(path, step):
    """Every step-th token of a byte-level vocabulary, as the bytes it stands for."""
    import json
    byte_of = {}
    n = 0
    for b in range(256):   # GPT-2's byte -> character mapping
        printable = 0x21 <= b <= 0x7E or 0xA1 <= b <= 0xAC or 0xAE <= b <= 0xFF
        byte_of[chr(b) if printable else chr(256 + n)] = b
        n += 0 if printable else 1
    vocab = json.load(open(path, encoding='utf-8'))['model']['vocab']
    toks = sorted(vocab, key=vocab.get)[::step]
    return [bytes(byte_of[c] for c in t) for t in toks if all(c in byte_of for c in t)]


def build_cases():
    """[(label, bytes)] shared by all tokenizers."""
    cases = []
    for name in sorted(os.listdir(os.path.join(FIX, 'text'))):
        data = open(os.path.join(FIX, 'text', name), 'rb').read()
        cases.append((f'file {name}', data))
        seen = set()
        for i, line in enumerate(data.split(b'\n')):
            if line not in seen and len(seen) < MAX_LINES:
                seen.add(line)
                cases.append((f'{name} line {i + 1}', line))
    for i, s in enumerate(EDGE):
        cases.append((f'edge {i} {s[:30]!r}', s.encode('utf-8')))
    for c in '*-=/ ':   # runs as long as the longest tokens (Llama 3 and Qwen3 have 65..128 characters)
        for n in (63, 64, 65, 66, 72, 75, 76, 78, 80, 100, 127, 128, 129):
            for pre in ('', ' ', '/', '//'):
                cases.append((f'run {pre!r}+{c!r}*{n}', (pre + c * n + ('x' if c == ' ' else '')).encode()))
    for name in ('llama3', 'qwen3'):   # vocabulary entries as text (whole-word lookups, ignore_merges)
        for text in vocab_texts(os.path.join(FIX, 'tokenizers', name, 'tokenizer.json'), 150):
            cases.append((f'{name} token {text[:20]!r}', text))
    for i, b in enumerate(EDGE_BYTES):
        cases.append((f'invalid {i} {b!r}', b))
    cps = class_edge_code_points()
    for i in range(0, len(cps), 16):
        chunk = [chr(c) for c in cps[i:i + 16]]
        s = ''.join(f'a{c}1{c}!{c} {c}x\'{c}\n' for c in chunk)
        cases.append((f'classes U+{cps[i]:04X}..', s.encode('utf-8')))
    decomposable = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF and
                    unicodedata.decomposition(chr(c)) and not unicodedata.decomposition(chr(c)).startswith('<')]
    for i in range(0, len(decomposable), 40):
        s = ' '.join(unicodedata.normalize('NFD', chr(c)) + chr(c) for c in decomposable[i:i + 40])
        cases.append((f'nfd U+{decomposable[i]:04X}..', s.encode('utf-8')))
    marks = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF and unicodedata.combining(chr(c))]
    for i in range(0, len(marks), 40):   # canonical reordering against ccc 220 and 240
        s = ' '.join(f'x{m}\u0316 x{m}\u0345 {m}\u0301' for m in marks[i:i + 40])
        cases.append((f'ccc U+{ord(marks[i]):04X}..', s.encode('utf-8')))
    rng = random.Random(1234)
    for i in range(1000):
        s = ''.join(rng.choice(POOL) for _ in range(rng.randint(1, 24)))
        cases.append((f'random {i} {s!r}', s.encode('utf-8')))
    return cases


class Reference:
    def __init__(self, name, folder):
        self.name = name
        if os.path.exists(os.path.join(folder, 'tokenizer.model')):
            import sentencepiece
            self.sp = sentencepiece.SentencePieceProcessor(model_file=os.path.join(folder, 'tokenizer.model'))
            self.hf = None
        else:
            from tokenizers import Tokenizer
            self.sp = None
            self.hf = Tokenizer.from_file(os.path.join(folder, 'tokenizer.json'))

    def encode(self, texts, mode):
        if self.sp:
            return self.sp.encode(texts, add_bos=(mode == 'bos'))
        self.hf.encode_special_tokens = mode != 'special'
        return [e.ids for e in self.hf.encode_batch(texts, add_special_tokens=(mode == 'bos'))]

    def pieces(self, text):
        """Token texts of the plain encoding of text."""
        if self.sp:
            return self.sp.encode(text, out_type=str)
        self.hf.encode_special_tokens = True
        return self.hf.encode(text, add_special_tokens=False).tokens

    def normalized_added_ids(self):
        """Ids of added tokens with normalized=true: Hugging Face matches and decodes
        them in their normalized form ("\u2581<unk>"); we follow llama.cpp (a
        documented known difference)."""
        if not self.hf:
            return set()
        return {i for i, a in self.hf.get_added_tokens_decoder().items() if a.normalized}

    def decode(self, ids_list):
        if self.sp:
            return [self.sp.decode(ids) for ids in ids_list]
        return self.hf.decode_batch(ids_list, skip_special_tokens=True)


def looks_special(t):
    """convert_hf_to_gguf.py's does_token_look_special."""
    return (t in ('<pad>', '<mask>', '<2mass>', '[@BOS@]') or (t.startswith('<|') and t.endswith('|>')) or
            (t.startswith('<\uff5c') and t.endswith('\uff5c>')) or (t.startswith('<unused') and t.endswith('>')))


def write_gguf_py(folder, path, pre):
    """A vocab-only GGUF as llama.cpp's convert_hf_to_gguf.py writes it (gguf-py's
    writer and SpecialVocab): _set_vocab_sentencepiece for tokenizer.model,
    _set_vocab_gpt2 for byte-level tokenizer.json."""
    import json
    import gguf
    w = gguf.GGUFWriter(path, 'llama')
    spm_path = os.path.join(folder, 'tokenizer.model')
    if os.path.exists(spm_path):
        import sentencepiece
        sp = sentencepiece.SentencePieceProcessor(model_file=spm_path)
        n = sp.vocab_size()
        types = [gguf.TokenType.UNKNOWN if sp.is_unknown(i) else gguf.TokenType.CONTROL if sp.is_control(i) else
                 gguf.TokenType.UNUSED if sp.is_unused(i) else gguf.TokenType.BYTE if sp.is_byte(i) else
                 gguf.TokenType.NORMAL for i in range(n)]
        w.add_tokenizer_model('llama')
        w.add_tokenizer_pre('default')
        w.add_token_list([sp.id_to_piece(i).encode() for i in range(n)])
        w.add_token_scores([sp.get_score(i) for i in range(n)])
        w.add_token_types(types)
        merges = False
    else:
        tj = json.load(open(os.path.join(folder, 'tokenizer.json'), encoding='utf-8'))
        added = {a['id']: a for a in tj['added_tokens']}
        rev = {i: t for t, i in tj['model']['vocab'].items()}
        n = max(list(rev) + list(added)) + 1
        tokens, types = [], []
        for i in range(n):
            if i in added:
                t = added[i]['content']
                special = added[i]['special'] or looks_special(t)
                types.append(gguf.TokenType.CONTROL if special else gguf.TokenType.USER_DEFINED)
            else:
                t = rev.get(i, f'[PAD{i}]')
                types.append(gguf.TokenType.NORMAL if i in rev else gguf.TokenType.UNUSED)
            tokens.append(t)
        w.add_tokenizer_model('gpt2')
        w.add_tokenizer_pre(pre)
        w.add_token_list(tokens)
        w.add_token_types(types)
        merges = True
    gguf.SpecialVocab(folder, load_merges=merges, n_vocab=n).add_to_gguf(w, quiet=True)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.close()


def run_tool(tool, source_args, lines, extra):
    with tempfile.NamedTemporaryFile('w', suffix='.txt', delete=False) as f:
        f.write('\n'.join(lines) + '\n')
        path = f.name
    try:
        out = subprocess.run([tool] + source_args + ['--batch-hex', path] + extra, capture_output=True, text=True)
    finally:
        os.unlink(path)
    if out.returncode != 0:
        raise RuntimeError(f'tokenize failed ({out.returncode}): {out.stderr.strip()}')
    return out.stdout.split('\n')[:len(lines)]


def encode_ours(tool, source_args, datas, extra):
    rows = run_tool(tool, source_args, [d.hex() for d in datas], extra)
    return [[int(x) for x in r.split()] for r in rows]


def report(name, mode, labels, ours, ref, failures):
    bad = [i for i in range(len(labels)) if ours[i] != ref[i]]
    print(f'{name:18s} {mode:8s} {len(labels):6d} cases, {len(bad)} mismatches')
    if bad:
        i = bad[0]
        k = next((j for j in range(min(len(ours[i]), len(ref[i]))) if ours[i][j] != ref[i][j]),
                 min(len(ours[i]), len(ref[i])))
        print(f'  first: {labels[i][:80]}: at id {k}: ours {ours[i][max(0, k - 3):k + 6]} '
              f'reference {ref[i][max(0, k - 3):k + 6]} (lengths {len(ours[i])} / {len(ref[i])})')
        failures.append((name, mode, len(bad)))


def check_tokenizer(name, folder, tool, gguf_tool, cases, failures, tmpdir):
    ref = Reference(name, folder)
    source = ['--tokenizer-dir', folder]
    if gguf_tool:
        path = os.path.join(tmpdir, name + '.gguf')
        if os.path.basename(gguf_tool).startswith('hfconv'):
            args = [gguf_tool, folder, '-o', path, '--vocab-only']
        else:
            args = [gguf_tool, folder, path]
        out = subprocess.run(args, capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(f'{gguf_tool} failed: {out.stderr.strip()}')
        source = [path]
    labels = [c[0] for c in cases]
    datas = [c[1] for c in cases]
    texts = [as_text(d) for d in datas]

    ours = encode_ours(tool, source, datas, ['--no-bos'])
    report(name, 'plain', labels, ours, ref.encode(texts, 'plain'), failures)
    if gguf_tool:   # the folder itself gives the same ids as its GGUF
        edge = [i for i in range(len(cases)) if labels[i].startswith(HAND_MADE)]
        from_dir = encode_ours(tool, ['--tokenizer-dir', folder], [datas[i] for i in edge], ['--no-bos'])
        report(name, 'dir', [labels[i] for i in edge], from_dir, [ours[i] for i in edge], failures)

    # Decoding our ids must give the reference's decoding of them.
    known = ref.normalized_added_ids()
    lines = [i for i in range(len(cases)) if not labels[i].startswith('file ')]
    sample = [i for i in lines if not known.intersection(ours[i])][:3000]
    excluded = len([i for i in lines[:3000] if known.intersection(ours[i])])
    ids_rows = [' '.join(map(str, ours[i])) for i in sample]
    dec = [bytes.fromhex(r).decode('utf-8', 'replace') for r in run_tool(tool, source, ids_rows, ['--decode'])]
    ref_dec = ref.decode([ours[i] for i in sample])
    bad = [j for j in range(len(sample)) if dec[j] != ref_dec[j]]
    note = f' ({excluded} cases with normalized added tokens excluded: known difference)' if excluded else ''
    print(f'{name:18s} {"decode":8s} {len(sample):6d} cases, {len(bad)} mismatches{note}')
    if bad:
        j = bad[0]
        print(f'  first: {labels[sample[j]][:80]}: ours {dec[j][:60]!r} reference {ref_dec[j][:60]!r}')
        failures.append((name, 'decode', len(bad)))

    short = [i for i in range(len(cases)) if not labels[i].startswith('file ')][:400]
    bos_ours = encode_ours(tool, source, [datas[i] for i in short], [])
    if name == 'llama3':   # its tokenizer.json adds no BOS; llama.cpp's default for llama-bpe does
        bos_ref = [[128000] + ours[i] for i in short]
    else:
        bos_ref = ref.encode([texts[i] for i in short], 'bos')
    report(name, 'bos', [labels[i] for i in short], bos_ours, bos_ref, failures)

    # --json: ids and the token texts
    text = 'Hello, w\u00f6rld! 123'
    out = subprocess.run([tool] + source + ['-p', text, '--json', '--no-bos'], capture_output=True, text=True)
    got = json.loads(out.stdout) if out.returncode == 0 else {}
    want = ref.encode([text], 'plain')[0]
    ok = got.get('ids') == want and got.get('pieces') == ref.pieces(text)
    print(f'{name:18s} {"json":8s} {1:6d} cases, {0 if ok else 1} mismatches')
    if not ok:
        print(f'  first: {text!r}: ours {out.stdout.strip()[:200]} {out.stderr.strip()[:200]}')
        failures.append((name, 'json', 1))

    # A GGUF written the way llama.cpp's converter does (not for tokenizer.json
    # "llama" vocabularies: the converter keeps no merges, so llama.cpp's
    # tokenization of those is not Hugging Face's).
    pre = {'llama3': 'llama-bpe', 'qwen3': 'qwen2', 'stories260K': 'default'}.get(name)
    if pre and gguf_tool:
        path = os.path.join(tmpdir, name + '-gguf-py.gguf')
        write_gguf_py(folder, path, pre)
        sub = [i for i in range(len(cases)) if labels[i].startswith(HAND_MADE)]
        flags = ['--no-bos', '--parse-special'] if ref.hf else ['--no-bos']
        conv = encode_ours(tool, [path], [datas[i] for i in sub], flags)
        want = [ours[i] for i in sub]
        if ref.hf:   # non-special added tokens are matched by Hugging Face in both modes
            want = ref.encode([texts[i] for i in sub], 'special')
        report(name, 'gguf-py', [labels[i] for i in sub], conv, want, failures)

    special = SPECIAL_TEXTS.get(name, [])
    if special and ref.hf:
        sp_ours = encode_ours(tool, source, [s.encode() for s in special], ['--no-bos', '--parse-special'])
        report(name, 'special', special, sp_ours, ref.encode(special, 'special'), failures)


def check_cli(tool, failures):
    """Exit codes and messages of the tool's failure paths."""
    runs = [([], 2, 'usage'), (['-p', 'x'], 2, 'usage'), (['--tokenizer-dir'], 2, 'needs a value'),
            (['/nonexistent/model.gguf', '-p', 'x'], 1, '/nonexistent/model.gguf: '),
            (['--tokenizer-dir', '/nonexistent', '-p', 'x'], 1, '/nonexistent'),
            (['--bogus'], 2, 'unknown option')]
    for args, rc, msg in runs:
        out = subprocess.run([tool] + args, capture_output=True, text=True)
        if out.returncode != rc or msg not in out.stderr:
            print(f'cli {args}: exit {out.returncode} (want {rc}), stderr {out.stderr.strip()[:120]!r}')
            failures.append(('cli', ' '.join(args), 1))
    print(f'cli: {len(runs)} cases, {len([f for f in failures if f[0] == "cli"])} mismatches')


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    tool = sys.argv[1]
    gguf_tool = sys.argv[2] if len(sys.argv) > 2 else None
    if not FIX or not os.path.isdir(os.path.join(FIX, 'tokenizers')):
        print('SKIP: fixtures not found (HFQ_FIXTURES)')
        return 77
    specs = [('llama3', 'tokenizers/llama3'), ('qwen3', 'tokenizers/qwen3'), ('llama2', 'tokenizers/llama2'),
             ('stories260K', 'models/stories260K'), ('TinyStories-656K', 'models/TinyStories-656K')]
    failures = []
    check_cli(tool, failures)
    cases = build_cases()
    with tempfile.TemporaryDirectory() as tmpdir:
        for name, rel in specs:
            check_tokenizer(name, os.path.join(FIX, rel), tool, gguf_tool, cases, failures, tmpdir)
    total = sum(n for _, _, n in failures)
    print(f'{total} mismatches in total' + (f' ({len(failures)} tokenizer/mode groups)' if failures else ''))
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
