"""A scripted chat of three clear topics, six exchanges each, as people write them: short user messages (most
under 12 tokens, some with no content of their own) and to-the-point replies. Its right boundaries are at the
first exchange of each topic."""

from __future__ import annotations

from typing import Any

PASTA = [
    ("What's the best way to cook spaghetti?", "Bring a large pot of water to a rolling boil, salt it well, add the spaghetti and stir in the first minute so it does not stick."),
    ("How much salt goes in the water?", "About one tablespoon of salt per four litres of water; the pasta water should taste mildly of the sea."),
    ("Should I add olive oil to the pot?", "No need: oil floats on top and makes the sauce slide off the pasta. Stirring early is what stops sticking."),
    ("ok", "Anything else about the pasta?"),
    ("How do I know when it's al dente?", "Bite a strand a minute before the packet time: it should be tender with a slightly firm core, no white chalky centre."),
    ("Why save some pasta water for the sauce?", "The starchy cooking water loosens the sauce and helps it cling to the spaghetti; add a splash when you toss them."),
]
BICYCLE = [
    ("My bike chain keeps slipping when I pedal hard", "A slipping chain usually means a worn chain or cassette, or a derailleur that needs indexing. Check chain stretch first."),
    ("How do I clean a rusty chain?", "Scrub it with degreaser and a brush, wipe it dry, then lube each link and wipe off the excess; heavy rust means replace it."),
    ("Do I need a chain tool to take it off?", "If the chain has a quick link you can open it with link pliers; otherwise a chain breaker tool pushes a pin out."),
    ("continue", "Once it is off, soak the chain in degreaser, and measure it with a chain checker: 0.5% stretch means a new chain."),
    ("How tight should the rear derailleur cable be?", "Tight enough that the chain shifts cleanly to each cog; fine-tune with the barrel adjuster a quarter turn at a time."),
    ("And how do I patch a flat tube?", "Find the hole, roughen the rubber around it, spread glue, wait a minute, press the patch on, and check the tyre for the thorn."),
]
TAXES = [
    ("When is the deadline to file my tax return?", "For most people the federal income tax return is due on April 15; an extension gives you until October 15."),
    ("Can I deduct my home office as a freelancer?", "Yes, if the space is used regularly and only for work you can take the home office deduction, simplified or actual expenses."),
    ("Which forms do I need for freelance income?", "You report freelance income on Schedule C, pay self-employment tax on Schedule SE, and clients send you 1099-NEC forms."),
    ("thanks", "You're welcome. Anything else on your tax return?"),
    ("What happens if I file late?", "Filing late costs a penalty of 5% of the unpaid tax per month, up to 25%, plus interest on what you owe."),
    ("Is it worth hiring an accountant?", "With freelance income, deductions and quarterly estimated payments, an accountant often saves more than the fee."),
]
TOPICS = (PASTA, BICYCLE, TAXES)

TOMATOES = [
    ("My tomato leaves are turning yellow", "Yellow lower leaves on tomatoes often mean nitrogen deficiency or overwatering; check the soil moisture first."),
    ("How often should I water them?", "Water tomatoes deeply two or three times a week, at the base, so the soil stays evenly moist but never soggy."),
    ("What fertilizer works best?", "A balanced vegetable fertilizer early on, then one higher in potassium once the tomato plants start to flower."),
    ("and then?", "Pinch out the side shoots on cordon tomatoes and tie the stems to stakes as the plants grow."),
    ("Should I prune the suckers?", "Yes for indeterminate tomatoes: removing suckers puts the plant's energy into fruit; leave them on bush varieties."),
    ("When are they ready to pick?", "Pick tomatoes when they are fully coloured and give slightly when squeezed; they also ripen indoors on a windowsill."),
]
LAPTOP = [
    ("My laptop fan is really loud", "A loud fan usually means the laptop is hot: dust in the vents, a heavy background process, or a blocked air intake."),
    ("How do I see what's using the CPU?", "Open Task Manager on Windows or Activity Monitor on a Mac and sort processes by CPU to find the culprit."),
    ("Can I clean the vents myself?", "Yes: power the laptop off and blow compressed air through the vents in short bursts, holding the fan still."),
    ("ok", "If it is still loud afterwards, the thermal paste may have dried out and need replacing."),
    ("Would a cooling pad help?", "A cooling pad helps a little by feeding cooler air to the bottom intake, usually a few degrees."),
    ("Is it bad for the battery?", "Heat ages a lithium battery faster, so keeping the laptop cool also keeps the battery healthy longer."),
]
JAPAN = [
    ("I'm planning a trip to Japan in April", "April is cherry blossom season in Japan, so book hotels in Tokyo and Kyoto early; it is busy and lovely."),
    ("Do I need a rail pass?", "A Japan Rail Pass pays off if you take several long shinkansen trips; for Tokyo and Kyoto alone, single tickets may be cheaper."),
    ("How many days for Kyoto?", "Three or four days in Kyoto covers the main temples, Arashiyama and a day trip to Nara."),
    ("yes please", "Here is a sample itinerary: Fushimi Inari early, Gion in the evening, Arashiyama bamboo grove on day two."),
    ("What about money, cash or card?", "Japan still uses a lot of cash: carry yen for small shops and temples, though cards work in cities and hotels."),
    ("Any etiquette I should know?", "Take your shoes off indoors where asked, don't tip, queue for trains, and keep your voice down on public transport."),
]
OTHER_TOPICS = (TOMATOES, LAPTOP, JAPAN)


def chat_messages(*topics: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """The topics' exchanges as OpenAI chat messages, in order."""
    return [
        message
        for topic in topics
        for question, reply in topic
        for message in ({"role": "user", "content": question}, {"role": "assistant", "content": reply})
    ]
