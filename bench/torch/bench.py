#!/usr/bin/python3
"""PyTorch twins of bench/tfm-bench: the same work, written as the tutorials
write it (/work/shared/seeds/), or with --style fast as PyTorch's own
modules do it fastest, timed the same way.

  --config 003  tutorial 003's Encoder/Decoder (Taylor series), batch 32,
                source 22, decoder input 84
  --config avg  tutorials 000/001: nn.Transformer on the digit average task,
                batch 32, source 91, decoder input 9
  --config 002  tutorial 002's CausalTransformer, batch 64, length 100

  --what train   a full step (forward, loss, backward, Adam step): `warmup`
                 untimed steps, then `steps` timed ones; median and min ms
  --what decode  (003 only) tutorial 003's greedy translate loop over
                 `sources` random sources, one at a time; the whole loop is
                 timed once, after one warm-up source (decode.py beside
                 it: the same decoding batched and cached, every config)

Prints one JSON line. Run as /usr/bin/python3 (Debian's python3-torch), with
OMP_WAIT_POLICY=passive and OMP_NUM_THREADS set as bench/run.py does.
"""
import argparse
import json
import math
import resource
import statistics
import time

import torch
import torch.nn as nn

# ---------------------------------------------------------------------------
# Tutorial 003: "Transformer Neural Networks" (Taylor series), after the
# Annotated Transformer. Learned positions, trainable sqrt(d) scales,
# separate Q/K/V linears, pad + subsequent masks.
# ---------------------------------------------------------------------------


class MultiHeadAttention(nn.Module):
    def __init__(self, emb_dim, n_heads, dropout):
        super().__init__()
        assert emb_dim % n_heads == 0
        self.emb_dim = emb_dim
        self.n_heads = n_heads
        self.head_dim = emb_dim // n_heads
        self.linear_Q = nn.Linear(emb_dim, emb_dim)
        self.linear_K = nn.Linear(emb_dim, emb_dim)
        self.linear_V = nn.Linear(emb_dim, emb_dim)
        self.linear_O = nn.Linear(emb_dim, emb_dim)
        self.dropout = nn.Dropout(dropout)
        # the tutorial divides by a trainable sqrt(emb_dim), not sqrt(head_dim)
        self.scale = nn.Parameter(torch.sqrt(torch.FloatTensor([emb_dim])))

    def forward(self, query, key, value, mask=None):
        batch_size = query.shape[0]
        Q = self.linear_Q(query)
        K = self.linear_K(key)
        V = self.linear_V(value)
        # [batch, len, emb] -> [batch, heads, len, head_dim]
        Q = Q.view(batch_size, -1, self.n_heads, self.head_dim).permute(0, 2, 1, 3)
        K = K.view(batch_size, -1, self.n_heads, self.head_dim).permute(0, 2, 1, 3)
        V = V.view(batch_size, -1, self.n_heads, self.head_dim).permute(0, 2, 1, 3)
        A = torch.matmul(Q, K.permute(0, 1, 3, 2)) / self.scale
        if mask is not None:
            A = A.masked_fill(mask == 0, -1e10)
        W = torch.softmax(A, dim=-1)
        W = self.dropout(W)
        attention = torch.matmul(W, V)
        attention = attention.permute(0, 2, 1, 3).contiguous()
        attention = attention.view(batch_size, -1, self.emb_dim)
        return self.linear_O(attention)


class Feedforward(nn.Module):
    def __init__(self, emb_dim, ff_dim, dropout):
        super().__init__()
        self.linear_1 = nn.Linear(emb_dim, ff_dim)
        self.linear_2 = nn.Linear(ff_dim, emb_dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        x = self.dropout(torch.relu(self.linear_1(x)))
        return self.linear_2(x)


class EncoderLayer(nn.Module):
    def __init__(self, emb_dim, n_heads, ff_dim, dropout):
        super().__init__()
        self.self_attention = MultiHeadAttention(emb_dim, n_heads, dropout)
        self.self_attention_norm = nn.LayerNorm(emb_dim)
        self.feedforward = Feedforward(emb_dim, ff_dim, dropout)
        self.feedforward_norm = nn.LayerNorm(emb_dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, src, src_mask):
        src_ = self.dropout(self.self_attention(src, src, src, src_mask))
        src = self.self_attention_norm(src + src_)
        src_ = self.dropout(self.feedforward(src))
        return self.feedforward_norm(src + src_)


class Encoder(nn.Module):
    def __init__(self, vocab_size, max_len, emb_dim, n_layers, n_heads, ff_dim, dropout):
        super().__init__()
        self.tok_embedding = nn.Embedding(vocab_size, emb_dim)
        self.pos_embedding = nn.Embedding(max_len, emb_dim)
        self.layers = nn.ModuleList([EncoderLayer(emb_dim, n_heads, ff_dim, dropout)
                                     for _ in range(n_layers)])
        self.dropout = nn.Dropout(dropout)
        self.scale = nn.Parameter(torch.sqrt(torch.FloatTensor([emb_dim])))

    def forward(self, src, src_mask):
        batch_size, src_len = src.shape
        pos = torch.arange(0, src_len).unsqueeze(0).repeat(batch_size, 1)
        src = self.dropout(self.tok_embedding(src) * self.scale + self.pos_embedding(pos))
        for layer in self.layers:
            src = layer(src, src_mask)
        return src


class DecoderLayer(nn.Module):
    def __init__(self, emb_dim, n_heads, ff_dim, dropout):
        super().__init__()
        self.self_attention = MultiHeadAttention(emb_dim, n_heads, dropout)
        self.self_attention_norm = nn.LayerNorm(emb_dim)
        self.attention = MultiHeadAttention(emb_dim, n_heads, dropout)
        self.attention_norm = nn.LayerNorm(emb_dim)
        self.feedforward = Feedforward(emb_dim, ff_dim, dropout)
        self.feedforward_norm = nn.LayerNorm(emb_dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, trg, src, trg_mask, src_mask):
        trg_ = self.dropout(self.self_attention(trg, trg, trg, trg_mask))
        trg = self.self_attention_norm(trg + trg_)
        trg_ = self.dropout(self.attention(trg, src, src, src_mask))
        trg = self.attention_norm(trg + trg_)
        trg_ = self.feedforward(trg)
        # as the tutorial writes it: dropout on the residual, not on trg_
        # (the same amount of work either way)
        trg = self.dropout(trg)
        return self.feedforward_norm(trg + trg_)


class Decoder(nn.Module):
    def __init__(self, vocab_size, max_len, emb_dim, n_layers, n_heads, ff_dim, dropout):
        super().__init__()
        self.tok_embedding = nn.Embedding(vocab_size, emb_dim)
        self.pos_embedding = nn.Embedding(max_len, emb_dim)
        self.layers = nn.ModuleList([DecoderLayer(emb_dim, n_heads, ff_dim, dropout)
                                     for _ in range(n_layers)])
        self.linear = nn.Linear(emb_dim, vocab_size)
        self.dropout = nn.Dropout(dropout)
        self.scale = nn.Parameter(torch.sqrt(torch.FloatTensor([emb_dim])))

    def forward(self, trg, src, trg_mask, src_mask):
        batch_size, trg_len = trg.shape
        pos = torch.arange(0, trg_len).unsqueeze(0).repeat(batch_size, 1)
        trg = self.dropout(self.tok_embedding(trg) * self.scale + self.pos_embedding(pos))
        for layer in self.layers:
            trg = layer(trg, src, trg_mask, src_mask)
        return self.linear(trg)


class Taylor(nn.Module):
    """Tutorial 003's `Transformer` (named here to avoid nn.Transformer)."""

    PAD, SOS, EOS = 0, 1, 2

    def __init__(self, src_vocab=37, trg_vocab=30, src_len=22, trg_len=85, emb_dim=64,
                 n_layers=2, n_heads=8, ff_dim=128, dropout=0.1):
        super().__init__()
        self.max_len = trg_len
        self.encoder = Encoder(src_vocab, src_len, emb_dim, n_layers, n_heads, ff_dim, dropout)
        self.decoder = Decoder(trg_vocab, trg_len, emb_dim, n_layers, n_heads, ff_dim, dropout)

    def make_src_mask(self, src):
        return (src != self.PAD).unsqueeze(1).unsqueeze(2)

    def make_trg_mask(self, trg):
        trg_len = trg.shape[1]
        trg_pad_mask = (trg != self.PAD).unsqueeze(1).unsqueeze(2)
        trg_sub_mask = torch.tril(torch.ones((trg_len, trg_len))).bool()
        return trg_pad_mask & trg_sub_mask

    def forward(self, src, trg):
        src_mask = self.make_src_mask(src)
        trg_mask = self.make_trg_mask(trg)
        src = self.encoder(src, src_mask)
        return self.decoder(trg, src, trg_mask, src_mask)

    def translate(self, src, n_tokens):
        """The tutorial's greedy loop for one source ([1, src_len]), except
        that it always generates n_tokens (no stop at <eos>, no skipping of
        <pad>), so that the work is fixed and equal to libtfm's."""
        self.eval()
        src_mask = self.make_src_mask(src)
        src_ = self.encoder(src, src_mask)
        trg = [self.SOS]
        for _ in range(n_tokens):
            # the decoder re-runs over the whole prefix at every step
            trg_ = torch.tensor(trg).unsqueeze(0)
            trg_mask = self.make_trg_mask(trg_)
            logits = self.decoder(trg_, src_, trg_mask, src_mask)
            probs = torch.softmax(logits[:, -1, :], dim=-1)
            token_probs, token_codes = torch.topk(probs, k=3)
            code = token_codes.t()[0, -1]  # the most probable next token
            trg.append(code)  # a 0-d tensor, as in the tutorial
        return trg


# ---------------------------------------------------------------------------
# Tutorials 000/001: "Sequence-to-Sequence Transformer in Pytorch" (average of
# ten numbers as digit sequences), nn.Transformer with batch_first=True.
# ---------------------------------------------------------------------------


class TokenEmbedding(nn.Module):
    def __init__(self, vocab_size, d_model):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.d_model = d_model

    def forward(self, tokens):
        return self.embedding(tokens)


class SinusoidalPositions(nn.Module):
    """Tutorial 001's PositionalEncoding (max_len 100)."""

    def __init__(self, d_model, max_len=100):
        super().__init__()
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
        scaling_factors = torch.tensor([10000.0 ** (-2 * i / d_model)
                                        for i in range(d_model // 2)])
        pe[:, 0::2] = torch.sin(position * scaling_factors)
        pe[:, 1::2] = torch.cos(position * scaling_factors)
        self.register_buffer('pe', pe.unsqueeze(0))

    def forward(self, x):
        return x + self.pe[:, :x.size(1)]


class Seq2SeqTransformer(nn.Module):
    def __init__(self, d_model=256, nhead=4, num_encoder_layers=3, num_decoder_layers=3,
                 dim_feedforward=128, vocab_size=13):
        super().__init__()
        self.tok_emb = TokenEmbedding(vocab_size, d_model)  # shared by source and target
        self.positional_encoding = SinusoidalPositions(d_model)
        # defaults as in the tutorial: dropout 0.1, relu, post-norm, final norms
        self.transformer = nn.Transformer(d_model, nhead, num_encoder_layers,
                                          num_decoder_layers, dim_feedforward,
                                          batch_first=True)
        self.generator = nn.Linear(d_model, vocab_size)

    def forward(self, src, tgt):
        src_emb = self.positional_encoding(self.tok_emb(src))
        tgt_emb = self.positional_encoding(self.tok_emb(tgt))
        tgt_mask = self.transformer.generate_square_subsequent_mask(tgt.size(1))
        outs = self.transformer(src_emb, tgt_emb, tgt_mask=tgt_mask)
        return self.generator(outs)


# ---------------------------------------------------------------------------
# Tutorial 002: "Implementing a Transformer" exercise, with its blanks filled
# in as its instructions say: QK^T/sqrt(d_k), masked_fill(-1e9), softmax, @V
# (no attention dropout); post-norm layers with dropout on each sub-layer's
# output; FFN w2(relu(w1 x)); a (1, L, L) tril no-peek mask.
# ---------------------------------------------------------------------------


class HeadwiseAttention(nn.Module):
    """Tutorial 002's MultiHeadAttention: per-head W_q/W_k/W_v of shape
    (heads, d_model, d_k), projected with einsum, and a W_o linear."""

    def __init__(self, d_model, num_heads):
        super().__init__()
        assert d_model % num_heads == 0
        self.d_model = d_model
        self.num_heads = num_heads
        self.d_k = d_model // num_heads
        self.W_q = nn.Parameter(torch.Tensor(num_heads, d_model, self.d_k))
        self.W_k = nn.Parameter(torch.Tensor(num_heads, d_model, self.d_k))
        self.W_v = nn.Parameter(torch.Tensor(num_heads, d_model, self.d_k))
        self.W_o = nn.Linear(d_model, d_model)
        for param in [self.W_q, self.W_k, self.W_v]:
            nn.init.xavier_uniform_(param)

    def scaled_dot_product_attention(self, Q, K, V, mask=None):
        attn_scores = torch.matmul(Q, K.transpose(-2, -1)) / math.sqrt(self.d_k)
        if mask is not None:
            attn_scores = attn_scores.masked_fill(mask == 0, -1e9)
        attn_probs = torch.softmax(attn_scores, dim=-1)
        return torch.matmul(attn_probs, V)

    def forward(self, Q, K, V, mask=None):
        batch_size, seq_len, _ = Q.shape
        Q_heads = torch.einsum("bnd,hde->bhne", Q, self.W_q)
        K_heads = torch.einsum("bnd,hde->bhne", K, self.W_k)
        V_heads = torch.einsum("bnd,hde->bhne", V, self.W_v)
        attn_output = self.scaled_dot_product_attention(Q_heads, K_heads, V_heads, mask)
        attn_output = attn_output.transpose(1, 2).reshape(batch_size, seq_len, self.d_model)
        return self.W_o(attn_output)


class PositionWiseFeedForward(nn.Module):
    def __init__(self, d_model, d_ff):
        super().__init__()
        self.relu = nn.ReLU()
        self.w1 = nn.Linear(d_model, d_ff)
        self.w2 = nn.Linear(d_ff, d_model)

    def forward(self, x):
        return self.w2(self.relu(self.w1(x)))


class PositionalEncoding(nn.Module):
    """Tutorial 002's (exp/log form of the same sinusoids)."""

    def __init__(self, d_model, max_seq_length):
        super().__init__()
        pe = torch.zeros(max_seq_length, d_model)
        position = torch.arange(0, max_seq_length, dtype=torch.float).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2).float()
                             * -(math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        self.register_buffer('pe', pe.unsqueeze(0))

    def forward(self, x):
        return x + self.pe[:, :x.size(1)]


class CausalEncoderLayer(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout_rate):
        super().__init__()
        self.self_attn = HeadwiseAttention(d_model, num_heads)
        self.feed_forward = PositionWiseFeedForward(d_model, d_ff)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout_rate)

    def forward(self, x):
        x = self.norm1(x + self.dropout(self.self_attn(x, x, x)))
        return self.norm2(x + self.dropout(self.feed_forward(x)))


class CausalDecoderLayer(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout_rate):
        super().__init__()
        self.self_attn = HeadwiseAttention(d_model, num_heads)
        self.cross_attn = HeadwiseAttention(d_model, num_heads)
        self.feed_forward = PositionWiseFeedForward(d_model, d_ff)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout_rate)

    def forward(self, x, enc_output, no_peek_mask):
        x = self.norm1(x + self.dropout(self.self_attn(x, x, x, no_peek_mask)))
        x = self.norm2(x + self.dropout(self.cross_attn(x, enc_output, enc_output)))
        return self.norm3(x + self.dropout(self.feed_forward(x)))


class CausalTransformer(nn.Module):
    def __init__(self, src_vocab_size=5000, tgt_vocab_size=5000, d_model=512, num_heads=8,
                 num_layers=6, d_ff=2048, max_seq_length=100, dropout=0.1):
        super().__init__()
        self.encoder_embedding = nn.Embedding(src_vocab_size, d_model)
        self.decoder_embedding = nn.Embedding(tgt_vocab_size, d_model)
        self.positional_encoding = PositionalEncoding(d_model, max_seq_length)
        self.encoder_layers = nn.ModuleList([CausalEncoderLayer(d_model, num_heads, d_ff, dropout)
                                             for _ in range(num_layers)])
        self.decoder_layers = nn.ModuleList([CausalDecoderLayer(d_model, num_heads, d_ff, dropout)
                                             for _ in range(num_layers)])
        self.fc = nn.Linear(d_model, tgt_vocab_size)
        self.dropout = nn.Dropout(dropout)

    def generate_mask(self, tgt):
        seq_length = tgt.size(1)
        return torch.tril(torch.ones(1, seq_length, seq_length)).bool()

    def forward(self, src, tgt):
        np_mask = self.generate_mask(tgt)
        src_embedded = self.dropout(self.positional_encoding(self.encoder_embedding(src)))
        tgt_embedded = self.dropout(self.positional_encoding(self.decoder_embedding(tgt)))
        enc_output = src_embedded
        for enc_layer in self.encoder_layers:
            enc_output = enc_layer(enc_output)
        dec_output = tgt_embedded
        for dec_layer in self.decoder_layers:
            dec_output = dec_layer(dec_output, enc_output, np_mask)
        return self.fc(dec_output)


# ---------------------------------------------------------------------------
# The benchmark. Random tokens in [1, vocab) (no padding, as tfm-bench's),
# made once, in memory. Each config returns its model and a step function
# written in its tutorial's order of calls.
# ---------------------------------------------------------------------------


def setup_003():
    model = Taylor()
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-4)
    avgloss = nn.CrossEntropyLoss(ignore_index=Taylor.PAD)
    x = torch.randint(1, 37, (32, 22))
    t = torch.randint(1, 30, (32, 85))  # decoder input t[:, :-1] is 84 long

    def step():
        # tutorial 003's train(): objective, zero_grad, backward, step
        model.train()
        logits = model(x, t[:, :-1])
        R = avgloss(logits.reshape(-1, logits.shape[-1]), t[:, 1:].reshape(-1)).mean()
        optimizer.zero_grad()
        R.backward()
        optimizer.step()
    return model, step


def setup_avg():
    model = Seq2SeqTransformer()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    criterion = nn.CrossEntropyLoss()
    src = torch.randint(1, 13, (32, 91))
    tgt = torch.randint(1, 13, (32, 10))  # 's' + 8 digits + 'e': decoder input 9

    def step():
        model.train()
        optimizer.zero_grad()
        logits = model(src, tgt[:, :-1])
        loss = criterion(logits.reshape(-1, logits.shape[-1]), tgt[:, 1:].reshape(-1))
        loss.item()  # the tutorial adds it to total_loss
        loss.backward()
        optimizer.step()
    return model, step


def setup_002():
    model = CausalTransformer()
    criterion = nn.CrossEntropyLoss(ignore_index=0)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.0001, betas=(0.9, 0.98), eps=1e-9)
    src_data = torch.randint(1, 5000, (64, 100))
    # the decoder input is tgt_data[:, :-1]: 99 tokens, as tfm-bench's
    tgt_data = torch.randint(1, 5000, (64, 100))

    def step():
        model.train()
        optimizer.zero_grad()
        output = model(src_data, tgt_data[:, :-1])
        loss = criterion(output.contiguous().view(-1, 5000),
                         tgt_data[:, 1:].contiguous().view(-1))
        loss.backward()
        optimizer.step()
        loss.item()  # the tutorial prints it
    return model, step


# ---------------------------------------------------------------------------
# The same work written PyTorch's fast way (--style fast): nn.Transformer's
# layers with batch_first and fused in-projections (nn.MultiheadAttention),
# no Python loop over heads, gradients set to None rather than zeroed (Adam's
# foreach path measured slower here on CPU: 396 against 294 ms at 003).
# Sizes, masks and loss as tfm-bench's configs.
# ---------------------------------------------------------------------------

FAST = {  # vocabularies, source and decoder-input lengths, batch, d, heads, layers, d_ff,
          # dropout, Adam (lr, beta2, eps), learned positions, shared embedding, pad
    '003': dict(src_vocab=37, tgt_vocab=30, src_len=22, tgt_len=84, batch=32, d=64, heads=8,
                layers=2, d_ff=128, dropout=0.1, lr=2e-4, beta2=0.999, eps=1e-8,
                learned=True, shared=False, pad=0),
    'avg': dict(src_vocab=13, tgt_vocab=13, src_len=91, tgt_len=9, batch=32, d=256, heads=4,
                layers=3, d_ff=128, dropout=0.1, lr=1e-3, beta2=0.999, eps=1e-8,
                learned=False, shared=True, pad=None),
    '002': dict(src_vocab=5000, tgt_vocab=5000, src_len=100, tgt_len=99, batch=64, d=512,
                heads=8, layers=6, d_ff=2048, dropout=0.1, lr=1e-4, beta2=0.98, eps=1e-9,
                learned=False, shared=False, pad=0),
}


class FastSeq2Seq(nn.Module):
    def __init__(self, c):
        super().__init__()
        d, max_len = c['d'], max(c['src_len'], c['tgt_len'] + 1)
        self.src_embedding = nn.Embedding(c['src_vocab'], d)
        self.tgt_embedding = self.src_embedding if c['shared'] else \
            nn.Embedding(c['tgt_vocab'], d)
        if c['learned']:
            self.positions = nn.Embedding(max_len, d)
        else:
            self.register_buffer('table', SinusoidalPositions(d, max_len).pe[0, :max_len])
            self.positions = None
        self.scale = math.sqrt(d)
        self.transformer = nn.Transformer(d, c['heads'], c['layers'], c['layers'], c['d_ff'],
                                          c['dropout'], batch_first=True)
        self.generator = nn.Linear(d, c['tgt_vocab'])
        self.dropout = nn.Dropout(c['dropout'])

    def embed(self, embedding, ids):
        n = ids.shape[1]
        where = self.positions(torch.arange(n)) if self.positions is not None else \
            self.table[:n]
        return self.dropout(embedding(ids) * self.scale + where)

    def forward(self, src, tgt, tgt_mask, src_padding, tgt_padding):
        y = self.transformer(self.embed(self.src_embedding, src),
                             self.embed(self.tgt_embedding, tgt), tgt_mask=tgt_mask,
                             src_key_padding_mask=src_padding,
                             tgt_key_padding_mask=tgt_padding,
                             memory_key_padding_mask=src_padding)
        return self.generator(y)


def setup_fast(config, precision='float32'):
    c = FAST[config]
    model = FastSeq2Seq(c)
    optimizer = torch.optim.Adam(model.parameters(), lr=c['lr'], betas=(0.9, c['beta2']),
                                 eps=c['eps'])
    criterion = nn.CrossEntropyLoss(ignore_index=c['pad'] if c['pad'] is not None else -100)
    src = torch.randint(1, c['src_vocab'], (c['batch'], c['src_len']))
    tgt = torch.randint(1, c['tgt_vocab'], (c['batch'], c['tgt_len'] + 1))
    tgt_in, labels = tgt[:, :-1], tgt[:, 1:]
    tgt_mask = nn.Transformer.generate_square_subsequent_mask(c['tgt_len'])
    pad = c['pad']
    src_padding = (src == pad) if pad is not None else None
    tgt_padding = (tgt_in == pad) if pad is not None else None

    # bfloat16: CPU autocast, PyTorch's mixed precision (its matrix products
    # on bfloat16 through oneDNN, parameters and optimizer in float32)
    autocast = torch.autocast('cpu', dtype=torch.bfloat16, enabled=precision == 'bfloat16')

    def step():
        model.train()
        with autocast:
            logits = model(src, tgt_in, tgt_mask, src_padding, tgt_padding)
            loss = criterion(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    return model, step


SETUPS = {'003': setup_003, 'avg': setup_avg, '002': setup_002}


def bench_train(config, steps, warmup, style='tutorial', precision='float32'):
    _, step = SETUPS[config]() if style == 'tutorial' else setup_fast(config, precision)
    for _ in range(warmup):
        step()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        times.append((time.perf_counter() - start) * 1e3)
    return {'steps': steps, 'median_ms': statistics.median(times), 'min_ms': min(times)}


def bench_decode(sources, n_tokens=84):
    model = Taylor()
    all_src = torch.randint(1, 37, (sources + 1, 22))  # +1: the warm-up source
    model.eval()
    with torch.no_grad():
        model.translate(all_src[:1], n_tokens)
        start = time.perf_counter()
        for i in range(1, sources + 1):  # batch_size 1, as the tutorial's test_loader
            model.translate(all_src[i:i + 1], n_tokens)
        total = (time.perf_counter() - start) * 1e3
    return {'steps': 1, 'sources': sources, 'median_ms': total, 'min_ms': total,
            'ms_per_source': total / sources, 'max_length': n_tokens, 'beam': 1,
            'tokens_per_s': sources * n_tokens / (total / 1e3)}


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--config', choices=sorted(SETUPS), default='003')
    p.add_argument('--what', choices=['train', 'decode'], default='train')
    p.add_argument('--threads', type=int, default=2)
    p.add_argument('--steps', type=int, default=10)
    p.add_argument('--warmup', type=int, default=3)
    p.add_argument('--sources', type=int, default=750)
    p.add_argument('--seed', type=int, default=0)
    p.add_argument('--style', choices=['tutorial', 'fast'], default='tutorial',
                   help="the tutorials' code, or PyTorch's fast modules (training only)")
    p.add_argument('--precision', choices=['float32', 'bfloat16'], default='float32',
                   help='bfloat16: --style fast under CPU autocast')
    a = p.parse_args()
    if a.precision == 'bfloat16' and a.style != 'fast':
        p.error('--precision bfloat16 needs --style fast')
    if a.what == 'decode' and a.config != '003':
        p.error('--what decode is tutorial 003 only')
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    if a.what == 'train':
        r = bench_train(a.config, a.steps, a.warmup, a.style, a.precision)
    else:
        r = bench_decode(a.sources)
    impl = 'pytorch' if a.style == 'tutorial' else 'pytorch-fast'
    out = {'impl': impl + ('-bf16' if a.precision == 'bfloat16' else ''), 'config': a.config,
           'what': a.what, 'threads': a.threads}
    out.update(r)
    out['peak_rss_mb'] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out['torch'] = torch.__version__
    out['torch_threads'] = torch.get_num_threads()
    print(json.dumps(out))


if __name__ == '__main__':
    main()
