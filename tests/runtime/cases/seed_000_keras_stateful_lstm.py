"""Seed 000: Keras 3 with the torch backend, a stateful LSTM, model.fit for 2 epochs: fails in backward.

Keras assigns the layer's state variable in place (keras/src/layers/rnn/rnn.py: ``self_state.assign(state)``)
after the LSTM step saved it for backward.
"""
import os

os.environ["KERAS_BACKEND"] = "torch"

import keras
import numpy as np
from keras import layers

keras.utils.set_random_seed(0)
batch, steps, features = 4, 5, 3
model = keras.Sequential([
    keras.Input(batch_shape=(batch, steps, features)),
    layers.LSTM(8, stateful=True),
    layers.Dense(1),
])
model.compile(optimizer="adam", loss="mse")
x = np.random.rand(16, steps, features).astype("float32")
y = np.random.rand(16, 1).astype("float32")
model.fit(x, y, batch_size=batch, epochs=2, shuffle=False, verbose=0)  # gg: culprit saved
