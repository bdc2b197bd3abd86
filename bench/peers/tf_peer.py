"""tf_peer.py: the 12 seed networks in TensorFlow (Keras layers, a tf.function training step),
trained on resident synthetic data, one case per process; prints one JSON line like
torch_peer.py.

Same layer shapes as plugins/networks_paper/*.cpp. Images are NHWC (TensorFlow's CPU
convolutions have no NCHW kernels); the work per step is the same. Keras's LSTM has one bias
per layer, as dlhost. Weight decay is added to the gradients (g + wd * w) before the momentum
update, which is exactly SGD's rule in dlhost and PyTorch.

The Transformers (plugins/networks_transformer) are Keras layers (MultiHeadAttention with its
causal mask for GPT-2, LayerNormalization, Dense, Embedding) in a keras.Model whose output layer
reads the token embeddings (tied), trained with Keras's AdamW at dlhost's settings (Keras adds
epsilon to sqrt(v) before the bias correction, PyTorch and dlhost after: same work). Their
parameter counts must equal dlhost's (checked on every run).

    python tf_peer.py NETWORK --batch B --threads T --warmup W --iterations N [--seq S]
    python tf_peer.py --check gpt2_tiny,bert_tiny,gpt2,bert_base   # parameter counts, loss
"""
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402

import peer_main  # noqa: E402
from optimizers import OPTIMIZERS  # noqa: E402
from transformer_settings import DROPOUT, SHAPES, adamw, default_sequence  # noqa: E402

L = tf.keras.layers


def fc_classifier(inputs, hidden, classes):
    x = inp = tf.keras.Input((inputs,))
    for h in hidden:
        x = L.Dense(h, activation="sigmoid")(x)
    return tf.keras.Model(inp, L.Dense(classes)(x))


def sequential(shape, layers):
    x = inp = tf.keras.Input(shape)
    for layer in layers:
        x = layer(x)
    return tf.keras.Model(inp, x)


def alexnet():
    return sequential((224, 224, 3), [
        L.ZeroPadding2D(2), L.Conv2D(96, 11, 4, activation="relu"), L.MaxPool2D(3, 2),
        L.Conv2D(256, 5, padding="same", activation="relu"), L.MaxPool2D(3, 2),
        L.Conv2D(384, 3, padding="same", activation="relu"),
        L.Conv2D(384, 3, padding="same", activation="relu"),
        L.Conv2D(256, 3, padding="same", activation="relu"), L.MaxPool2D(3, 2), L.Flatten(),
        L.Dense(4096, activation="relu"), L.Dropout(0.5),
        L.Dense(4096, activation="relu"), L.Dropout(0.5), L.Dense(1000)])


def alexnet_r():
    # Ceil-mode pooling of 32 -> 16 -> 8 -> 4 is 'same' pooling for these sizes.
    return sequential((32, 32, 3), [
        L.Conv2D(32, 5, padding="same"), L.MaxPool2D(3, 2, padding="same"), L.ReLU(),
        L.Conv2D(32, 5, padding="same", activation="relu"), L.MaxPool2D(3, 2, padding="same"),
        L.Conv2D(64, 5, padding="same", activation="relu"),
        L.AveragePooling2D(3, 2, padding="same"), L.Flatten(), L.Dense(10)])


def lenet():
    return sequential((28, 28, 1), [
        L.Conv2D(20, 5), L.MaxPool2D(2, 2), L.Conv2D(50, 5), L.MaxPool2D(2, 2), L.Flatten(),
        L.Dense(500, activation="relu"), L.Dense(10)])


def autoencoder():
    x = inp = tf.keras.Input((784,))
    for w in (1000, 500, 250, 30, 250, 500, 1000, 784):
        x = L.Dense(w, activation=None if w == 30 else "sigmoid")(x)
    return tf.keras.Model(inp, x)


def conv_bn(x, cout, k, s, relu):
    if k > 1:
        x = L.ZeroPadding2D(k // 2)(x)
    x = L.BatchNormalization()(L.Conv2D(cout, k, s, use_bias=False)(x))
    return L.ReLU()(x) if relu else x


def resnet50():
    x = inp = tf.keras.Input((224, 224, 3))
    x = conv_bn(x, 64, 7, 2, True)
    x = L.MaxPool2D(3, 2)(L.ZeroPadding2D(1)(x))
    for stage, (blocks, width) in enumerate(zip((3, 4, 6, 3), (64, 128, 256, 512))):
        for i in range(blocks):
            stride = 2 if (i == 0 and stage > 0) else 1
            y = conv_bn(x, width, 1, stride, True)
            y = conv_bn(y, width, 3, 1, True)
            y = conv_bn(y, 4 * width, 1, 1, False)
            s = conv_bn(x, 4 * width, 1, stride, False) if i == 0 else x
            x = L.ReLU()(L.Add()([y, s]))
    x = L.GlobalAveragePooling2D()(x)
    return tf.keras.Model(inp, L.Dense(1000)(x))


def resnet56():
    x = inp = tf.keras.Input((32, 32, 3))
    x = conv_bn(x, 16, 3, 1, True)
    for stage, width in enumerate((16, 32, 64)):
        for i in range(9):
            stride = 2 if (i == 0 and stage > 0) else 1
            y = conv_bn(x, width, 3, stride, True)
            y = L.Conv2D(width, 3, padding="same", use_bias=False)(y)
            s = L.Conv2D(width, 1, 2, use_bias=False)(x) if stride == 2 else x
            x = L.BatchNormalization()(L.Add()([y, s]))
    x = L.GlobalAveragePooling2D()(x)
    return tf.keras.Model(inp, L.Dense(10)(x))


def language_model(steps):
    x = inp = tf.keras.Input((steps,), dtype="int32")
    x = L.Embedding(10000, 256)(x)
    x = L.LSTM(256, return_sequences=True)(L.LSTM(256, return_sequences=True)(x))
    return tf.keras.Model(inp, L.Dense(10000)(x))


class TransformerLM(tf.keras.Model):
    """GPT-2 (pre-LN decoder, causal, tanh GELU, tied head without bias) or BERT with its
    masked-LM head (post-LN encoder, erf GELU, tied decoder with a bias), as transformer.cpp."""

    def __init__(self, s, dropout):
        super().__init__()
        c, self.s = s.hidden, s
        init = tf.keras.initializers.RandomNormal(stddev=0.02)
        eps = 1e-5 if s.decoder else 1e-12
        self.wte = L.Embedding(s.vocab, c, embeddings_initializer=init)
        self.wpe = L.Embedding(s.positions, c, embeddings_initializer=init)
        self.drop = L.Dropout(dropout)
        dense = lambda n: L.Dense(n, kernel_initializer=init)  # noqa: E731
        self.blocks = [dict(
            attn=L.MultiHeadAttention(s.heads, c // s.heads, dropout=dropout,
                                      kernel_initializer=init),
            attn_drop=L.Dropout(dropout), fc=dense(s.ffn), proj=dense(c),
            mlp_drop=L.Dropout(dropout), ln_1=L.LayerNormalization(epsilon=eps),
            ln_2=L.LayerNormalization(epsilon=eps)) for _ in range(s.layers)]
        self.ln_f = L.LayerNormalization(epsilon=eps)  # GPT-2's final one, BERT's embeddings'
        if not s.decoder:
            self.transform = dense(c)
            self.transform_ln = L.LayerNormalization(epsilon=eps)
            self.decoder_bias = self.add_weight(shape=(s.vocab,), initializer="zeros",
                                                name="decoder_bias")

    def call(self, ids, training=False):
        s = self.s
        gelu = lambda x: tf.nn.gelu(x, approximate=s.decoder)  # noqa: E731
        x = self.wte(ids) + self.wpe(tf.range(tf.shape(ids)[1]))
        if not s.decoder:
            x = self.ln_f(x)
        x = self.drop(x, training=training)
        for b in self.blocks:
            def attention(h):
                a = b["attn"](h, h, h, use_causal_mask=s.decoder, training=training)
                return b["attn_drop"](a, training=training)

            def mlp(h):
                return b["mlp_drop"](b["proj"](gelu(b["fc"](h))), training=training)
            if s.decoder:
                x = x + attention(b["ln_1"](x))
                x = x + mlp(b["ln_2"](x))
            else:
                x = b["ln_1"](x + attention(x))
                x = b["ln_2"](x + mlp(x))
        if s.decoder:
            return tf.matmul(self.ln_f(x), self.wte.embeddings, transpose_b=True)
        h = self.transform_ln(gelu(self.transform(x)))
        return tf.matmul(h, self.wte.embeddings, transpose_b=True) + self.decoder_bias


def transformer(name, batch, seq, g):
    """(model, ids, targets, loss): random tokens and targets, one a position, resident."""
    s = SHAPES[name]
    model = TransformerLM(s, DROPOUT)
    ids = g.uniform((batch, seq), 0, s.vocab, dtype=tf.int32)
    model(ids[:1])  # creates the weights
    ce = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    return model, ids, g.uniform((batch, seq), 0, s.vocab, dtype=tf.int32), ce


def make(name, batch, seq=None):
    """(model, input, target, loss) for one network; data random and resident."""
    g = tf.random.Generator.from_seed(42)
    ce = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    if name in SHAPES:
        return transformer(name, batch, seq or default_sequence(name), g)

    def labels(shape, classes):
        return g.uniform(shape, 0, classes, dtype=tf.int32)

    if name in ("fcn5", "fcn8"):
        model = fc_classifier(26752, [2048] * (3 if name == "fcn5" else 6), 26752)
        return model, g.normal((batch, 26752)), labels((batch,), 26752), ce
    if name == "fcnr":
        return (fc_classifier(784, [2048, 4096, 1024], 10), g.normal((batch, 784)),
                labels((batch,), 10), ce)
    if name == "autoencoder":
        x = g.uniform((batch, 784))
        return autoencoder(), x, x, tf.keras.losses.MeanSquaredError()
    if name.startswith("lstm"):
        steps = 64 if name == "lstm64" else 32
        return (language_model(steps), labels((batch, steps), 10000),
                labels((batch, steps), 10000), ce)
    builders = {"alexnet": (alexnet, 224, 3, 1000), "resnet50": (resnet50, 224, 3, 1000),
                "alexnet_r": (alexnet_r, 32, 3, 10), "resnet56": (resnet56, 32, 3, 10),
                "lenet": (lenet, 28, 1, 10)}
    build, h, c, classes = builders[name]
    return build(), g.normal((batch, h, h, c)), labels((batch,), classes), ce


def optimizer(name):
    """(Keras optimizer, weight decay added to the gradients, clip norm) as dlhost trains the
    network: SGD (paper networks) or AdamW (Transformers; its decay is decoupled, inside)."""
    if name in SHAPES:
        lr, (beta1, beta2), eps, wd = adamw(name)
        return tf.keras.optimizers.AdamW(learning_rate=lr, weight_decay=wd, beta_1=beta1,
                                         beta_2=beta2, epsilon=eps), 0, 0
    lr, momentum, wd, clip = OPTIMIZERS[name]
    return tf.keras.optimizers.SGD(learning_rate=float(lr), momentum=float(momentum)), wd, clip


def train(name, batch, seq, warmup, iterations):
    """Times `iterations` steps after `warmup`; (ms per step, losses, parameter count)."""
    tf.random.set_seed(42)
    model, x, target, loss_fn = make(name, batch, seq)
    opt, wd, clip = optimizer(name)
    variables = model.trainable_variables

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = loss_fn(target, model(x, training=True))
        grads = tape.gradient(loss, variables)
        if wd:
            grads = [gr + wd * v for gr, v in zip(grads, variables)]
        if clip:
            grads, _ = tf.clip_by_global_norm(grads, clip)
        opt.apply_gradients(zip(grads, variables))
        return loss

    times, losses = [], []
    for i in range(warmup + iterations):
        t0 = time.perf_counter()
        loss = step().numpy()  # .numpy() waits for the step
        t1 = time.perf_counter()
        losses.append(float(loss))
        if i >= warmup:
            times.append((t1 - t0) * 1e3)
    return times, losses, int(sum(tf.size(v) for v in variables))


def set_threads(threads):
    # inter-op threads = threads, as dlhost's cpu_tensorflow runs by default (its option
    # inter_op_threads; plugin.cpp) and as TensorFlow's own default (0: one per core) gives a
    # user on a machine of `threads` cores; 1 here ran the peer's independent ops one at a time
    # where dlhost's ran two (issue 40: the 2-thread LSTM / FC rows).
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)


if __name__ == "__main__":
    peer_main.main("tensorflow " + tf.__version__, set_threads, train)
